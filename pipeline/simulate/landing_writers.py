"""Writers of landing files (used by the click simulator), with the malformed rows engines emit.

A landing row is a tuple in LANDING_FIELDS order. A corruption kind turns a row into one of the
faults seen in real logs, written in the file's own format:

* ``truncated``: a partial write (JSONL: the line cut in half; CSV/TSV: the last three fields
  missing; Parquet: the last three values null);
* ``wrong_type``: ``position`` as text such as ``"#3"`` (Parquet is typed, so there it is 0);
* ``missing_field``: ``doc_id`` absent (JSONL), empty (CSV/TSV) or null (Parquet).
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage.schemas import LANDING_FIELDS

FORMATS = ("jsonl", "csv", "tsv", "parquet")
CORRUPTIONS = ("truncated", "wrong_type", "missing_field")
FIELDS = tuple(LANDING_FIELDS)
_POSITION = FIELDS.index("position")
_DOC_ID = FIELDS.index("doc_id")
_PARQUET_SCHEMA = pa.schema(
    [(name, pa.int32() if name == "position" else pa.bool_() if name == "clicked" else pa.string()) for name in FIELDS]
)


def encode_landing(rows: Sequence[tuple[Any, ...]], corruptions: Sequence[str | None], fmt: str) -> bytes:
    """The bytes of one landing file holding ``rows`` (``corruptions[i]`` applied to row i)."""
    if fmt == "jsonl":
        quoted: dict[str, str] = {}
        return "".join(_json_line(row, kind, quoted) + "\n" for row, kind in zip(rows, corruptions)).encode("utf-8")
    if fmt in ("csv", "tsv"):
        return _delimited(rows, corruptions, "," if fmt == "csv" else "\t")
    if fmt == "parquet":
        return _parquet(rows, corruptions)
    raise ValueError(f"unknown landing format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _json_line(row: tuple[Any, ...], kind: str | None, quoted: dict[str, str]) -> str:
    """One JSON object (keys in LANDING_FIELDS order); ``quoted`` memoises JSON string literals."""
    if kind is not None:
        record = dict(zip(FIELDS, row))
        if kind == "wrong_type":
            record["position"] = f"#{record['position']}"
        elif kind == "missing_field":
            del record["doc_id"]
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        return line[: len(line) // 2] if kind == "truncated" else line
    parts = []
    for name, value in zip(FIELDS, row):
        if isinstance(value, str):
            text = quoted.get(value)
            if text is None:
                text = quoted[value] = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = json.dumps(value)
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"


def _delimited(rows: Sequence[tuple[Any, ...]], corruptions: Sequence[str | None], delimiter: str) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(FIELDS)
    for row, kind in zip(rows, corruptions):
        fields = [*row[:-1], int(row[-1])]
        if kind == "wrong_type":
            fields[_POSITION] = f"#{fields[_POSITION]}"
        elif kind == "missing_field":
            fields[_DOC_ID] = ""
        writer.writerow(fields[:-3] if kind == "truncated" else fields)
    return out.getvalue().encode("utf-8")


def _parquet(rows: Sequence[tuple[Any, ...]], corruptions: Sequence[str | None]) -> bytes:
    columns: list[list[Any]] = [list(col) for col in zip(*rows)] if rows else [[] for _ in FIELDS]
    for i, kind in enumerate(corruptions):
        if kind == "truncated":
            for col in columns[-3:]:
                col[i] = None
        elif kind == "wrong_type":
            columns[_POSITION][i] = 0
        elif kind == "missing_field":
            columns[_DOC_ID][i] = None
    sink = io.BytesIO()
    pq.write_table(pa.table(dict(zip(FIELDS, columns)), schema=_PARQUET_SCHEMA), sink, compression="zstd")
    return sink.getvalue()
