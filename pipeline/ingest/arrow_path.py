"""The vectorised ingest path: each landing file decoded into Arrow columns, checked column-wise.

Each format's decoder turns the file into Arrow columns of the rows it could split cleanly,
plus the lines it could not; :func:`pipeline.ingest.columns.check_columns` accepts the rows that
are certainly valid; every other row (not cleanly split, or not certainly valid) is rebuilt as
the per-line reader would build it and goes through the per-line checks
(:func:`pipeline.ingest.reference_path.check_records`), so its quarantine reason is the reference's.

* JSONL: lines are cut with numpy at the newlines (the file must be UTF-8 without a BOM) and
  with pyarrow at their quotes; a line becomes a row of columns only when it has no backslash
  and its 33 pieces read exactly ``{"ts":"…",…,"position":N,"clicked":true|false}`` (the nine
  fields in LANDING_FIELDS order, compact or ``json.dumps``-default separators, printable ASCII
  values): a JSON object whose values ``json.loads`` reads as the text between the quotes.
* CSV/TSV: Python's C ``csv`` reader splits the records (quoted fields, doubled quotes and line
  breaks inside quotes as the per-line reader reads them); records with the header's width and
  under MAX_LINE_BYTES become columns.
* Parquet: the columns as stored, when their types are text, signed integers and booleans.

A file whose bytes are not UTF-8, that carries a byte-order mark, whose CSV the ``csv`` module
cannot parse, whose Parquet columns have other types, and TREC XML files, are read whole by the
per-line path (which also stops on a wrong encoding with the reference's error).
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import posixpath
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.columns import check_columns
from pipeline.ingest.formats import RawRecord
from pipeline.ingest.formats.delimited import delimited_record, read_header, record_text
from pipeline.ingest.formats.jsonl import line_record
from pipeline.ingest.formats.parquet import read_landing_table, table_records
from pipeline.ingest.formats.records import MAX_LINE_BYTES, require_bytes
from pipeline.ingest.reference_path import FileResult, check_records, read_file_per_line
from pipeline.storage.schemas import LANDING_FIELDS

_STRING_FIELDS = tuple(LANDING_FIELDS)[:7]  # ts .. title
_POSITION_TOKEN = r"^: ?(0|[1-9][0-9]{0,9}), ?$"
_CLICKED_TOKEN = r"^: ?(true|false)\}[ \t\r]*\n?$"
_JSONL_PARTS = 33  # pieces of a line of the exact JSONL form cut at its quotes
_COLON, _COMMA = pa.array([":", ": "]), pa.array([",", ", "])
_BOM = b"\xef\xbb\xbf"


@dataclass
class Decoded:
    """A landing file as Arrow columns (rows that split cleanly, with ``line``), and its other lines."""

    columns: pa.Table
    unsplit_lines: np.ndarray
    rows_read: int
    records: Callable[[list[int]], list[RawRecord]]  # the per-line reader's records of these lines


def read_file_vectorised(data: bytes, path: str, day: dt.date) -> FileResult:
    """The vectorised path for one file (see the module docstring); same result as the per-line path."""
    decoder = DECODERS.get(posixpath.splitext(path)[1].lower())
    decoded = decoder(data, path) if decoder else None
    if decoded is None:
        return read_file_per_line(data, path, day)
    sure_rows, unsure_lines = check_columns(decoded.columns, path, day)
    lines = np.sort(np.concatenate([decoded.unsplit_lines, unsure_lines])).tolist()
    other_rows, rejected = check_records(decoded.records(lines), path, day)
    rows = sure_rows if other_rows.num_rows == 0 else pa.concat_tables([sure_rows, other_rows]).sort_by("source_line")
    return FileResult(path, decoded.rows_read, rows, rejected)


def decode_jsonl(data: bytes, path: str) -> Decoded | None:
    """Lines of the exact JSONL form as columns (see the module docstring); None when not plain UTF-8."""
    require_bytes(path, data)
    if data.startswith(_BOM):
        return None  # read per line, which drops the BOM
    octets = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(octets == 10) + 1
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    stops = offsets[1:] - (octets[ends - 1] == 10)
    wide = len(data) >= 2**31  # Arrow's string offsets are int32
    lines = (pa.LargeStringArray if wide else pa.StringArray).from_buffers(
        len(ends), pa.py_buffer(offsets if wide else offsets.astype(np.int32)), pa.py_buffer(data))
    if not data.isascii():
        try:
            lines.validate(full=True)
        except pa.ArrowInvalid:  # not UTF-8: read per line, which stops on a wrong encoding
            return None
    escaped = np.zeros(len(ends), dtype=bool)
    escaped[np.searchsorted(offsets, np.flatnonzero(octets == 0x5C), side="right") - 1] = True  # a backslash
    pieces = pc.split_pattern(lines, '"')
    rows = np.flatnonzero(pc.equal(pc.list_value_length(pieces), _JSONL_PARTS).to_numpy(zero_copy_only=False)
                          & ~escaped & (stops - offsets[:-1] <= MAX_LINE_BYTES))
    first_piece = pieces.offsets.to_numpy()[rows]
    by_piece = pieces.values.take(pa.array((first_piece + np.arange(_JSONL_PARTS)[:, None]).ravel()))
    by_piece = by_piece.cast(pa.string()) if wide else by_piece

    def piece(k: int) -> pa.Array:
        return by_piece.slice(k * len(rows), len(rows))

    exact = _exact_json_form(piece)
    columns = {name: piece(3 + 4 * k) for k, name in enumerate(_STRING_FIELDS)}
    columns["position"] = pc.cast(pc.utf8_trim(pc.if_else(exact, piece(30), ":0,"), " :,"), pa.int64())
    columns["clicked"] = pc.match_substring(piece(32), "true")
    columns["line"] = pa.array(rows + 1)
    exact_rows = exact.to_numpy(zero_copy_only=False)
    unsplit = np.ones(len(ends), dtype=bool)
    unsplit[rows[exact_rows]] = False
    table = pa.table(columns) if exact_rows.all() else pa.table(columns).filter(exact)

    def records(numbers: list[int]) -> list[RawRecord]:
        return [line_record(n, data[offsets[n - 1] : stops[n - 1]]) for n in numbers]

    return Decoded(table, np.flatnonzero(unsplit) + 1, len(ends), records)


def _exact_json_form(piece: Callable[[int], pa.Array]) -> pa.Array:
    """Which lines cut at their 32 quotes are ``{"ts":"…",…,"position":N,"clicked":B}`` exactly.

    Separators may be compact or json.dumps' default (``", "``, ``": "``); the values must be
    printable ASCII (no control character: valid JSON strings, read as written, the line having no
    backslash).
    """
    checks = [pc.equal(piece(0), "{"), pc.equal(piece(29), "position"), pc.equal(piece(31), "clicked"),
              pc.match_substring_regex(piece(30), _POSITION_TOKEN), pc.match_substring_regex(piece(32), _CLICKED_TOKEN)]
    for k, name in enumerate(_STRING_FIELDS):
        checks += [pc.equal(piece(1 + 4 * k), name), pc.is_in(piece(2 + 4 * k), value_set=_COLON),
                   pc.ascii_is_printable(piece(3 + 4 * k)), pc.is_in(piece(4 + 4 * k), value_set=_COMMA)]
    exact = checks[0]
    for check in checks[1:]:
        exact = pc.and_(exact, check)
    return exact.fill_null(False)


def decode_delimited(data: bytes, path: str, delimiter: str) -> Decoded | None:
    """Records of the header's width as text columns; None when the file is not UTF-8 or csv fails."""
    require_bytes(path, data)
    if not _is_utf8(data):
        return None
    lines = list(io.StringIO(data.decode("utf-8").removeprefix("\ufeff"), newline=""))
    reader = csv.reader(lines, delimiter=delimiter)
    header = read_header(path, reader)
    rows: list[list[str]] = []
    firsts: list[int] = []
    first = reader.line_num + 1
    try:
        for fields in reader:
            rows.append(fields)
            firsts.append(first)
            first = reader.line_num + 1
    except csv.Error:
        return None
    starts = np.array(firsts, dtype=np.int64)
    lasts = np.append(starts[1:] - 1, reader.line_num) if rows else starts
    chars = np.concatenate([[0], np.cumsum([len(line) for line in lines])])
    shaped = (np.array([len(f) for f in rows], dtype=np.int64) == len(header)) & ((chars[lasts] - chars[starts - 1]) * 4 <= MAX_LINE_BYTES)
    good = [fields for fields, ok in zip(rows, shaped.tolist()) if ok]
    transposed = list(zip(*good)) if good else [() for _ in header]
    where = {name: i for i, name in enumerate(header)}  # a repeated column: the last one, as dict(zip()) keeps
    columns = {name: pa.array(transposed[where[name]], pa.string()) for name in LANDING_FIELDS}
    columns["line"] = pa.array(starts[shaped])
    index = {line: i for i, line in enumerate(firsts)}

    def records(numbers: list[int]) -> list[RawRecord]:
        return [delimited_record(n, record_text(lines, n, int(lasts[index[n]])), rows[index[n]], header) for n in numbers]

    return Decoded(pa.table(columns), starts[~shaped], len(rows), records)


def decode_parquet(data: bytes, path: str) -> Decoded | None:
    """The landing columns as stored; None when a column has a type the column checks do not take."""
    table = read_landing_table(data, path)
    for name in LANDING_FIELDS:
        column = table.column(name)
        kind = column.type
        wanted = (pa.types.is_signed_integer(kind) or pa.types.is_string(kind) if name == "position"
                  else pa.types.is_boolean(kind) or pa.types.is_string(kind) if name == "clicked" else pa.types.is_string(kind))
        if not wanted:
            return None
        if pa.types.is_string(kind):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:  # not UTF-8: the per-line reader names the file
                return None
    columns = table.append_column("line", pa.array(np.arange(1, table.num_rows + 1, dtype=np.int64)))
    return Decoded(columns, np.array([], dtype=np.int64), table.num_rows, lambda numbers: table_records(table, numbers, path))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


DECODERS: dict[str, Callable[[bytes, str], Decoded | None]] = {
    ".jsonl": decode_jsonl,
    ".ndjson": decode_jsonl,
    ".json": decode_jsonl,
    ".csv": lambda data, path: decode_delimited(data, path, ","),
    ".tsv": lambda data, path: decode_delimited(data, path, "\t"),
    ".parquet": decode_parquet,
}
