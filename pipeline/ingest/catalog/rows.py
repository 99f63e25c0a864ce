"""One catalogue landing file: the click ingest's reader for its format, then every row checked.

A row is kept as a :class:`CatalogRow` or rejected with its reason (the quarantine's). Besides the readers'
own policies (line and field sizes, UTF-8, empty files: :mod:`pipeline.ingest.formats.records`):

* ``product_id``: a non-blank string of at most :data:`MAX_ID_CHARS` characters, kept as given;
* ``op``: ``upsert`` or ``retire`` (any case, spaces around ignored); empty, null or absent is ``upsert``;
  a snapshot lists the live products, so a ``retire`` there is rejected;
* ``title`` (an upsert's): a non-blank string of at most :data:`MAX_TITLE_CHARS` characters, normalised
  as click titles are (:func:`pipeline.core.textnorm.normalize`) with the raw text kept beside it;
* every other column with a value (not null, not empty) is an attribute: a JSON object, keys sorted, at most
  :data:`MAX_FIELD_CHARS` characters.
"""
from __future__ import annotations

import datetime as dt
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from pipeline.core.errors import InputError
from pipeline.core.schemas import CATALOG_LANDING_COLUMNS, CATALOG_OPS
from pipeline.core.store import Store
from pipeline.core.textnorm import normalize
from pipeline.ingest.formats import RawRecord, Reader, RowError, reader_for
from pipeline.ingest.formats.delimited import read_delimited
from pipeline.ingest.formats.jsonl import read_jsonl
from pipeline.ingest.formats.parquet import read_parquet
from pipeline.ingest.formats.records import MAX_FIELD_CHARS, check_string, preview

#: A data file whose name starts with this is part of the day's snapshot; any other is a delta.
SNAPSHOT_PREFIX = "snapshot"
MAX_TITLE_CHARS = 1024
MAX_ID_CHARS = 256
_NAMED = frozenset((*CATALOG_LANDING_COLUMNS, "op"))


def _delimited(delimiter: str) -> Reader:
    def read(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
        return read_delimited(data, source, delimiter, CATALOG_LANDING_COLUMNS)
    return read


def _parquet(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    return read_parquet(data, source, required=CATALOG_LANDING_COLUMNS, every_column=True)


#: The click ingest's readers, requiring the catalogue's columns (and keeping every other column of a Parquet file).
READERS: dict[str, Reader] = {".csv": _delimited(","), ".tsv": _delimited("\t"), ".jsonl": read_jsonl,
                              ".ndjson": read_jsonl, ".json": read_jsonl, ".parquet": _parquet}


class CatalogRow(NamedTuple):
    """A row that passed the checks (a retirement has empty titles and no attributes)."""

    line: int
    raw: str
    product_id: str
    retire: bool
    title_raw: str
    title: str
    attributes: str


@dataclass
class CatalogFile:
    """What one catalogue file yields: its kept rows and its rejected ones ``(line, reason, raw)``, in line order."""

    path: str
    snapshot: bool
    rows_read: int
    rows: list[CatalogRow] = field(default_factory=list)
    rejected: list[tuple[int, str, str]] = field(default_factory=list)


def is_snapshot(path: str) -> bool:
    """Whether the file at ``path`` is part of a snapshot (its name starts with SNAPSHOT_PREFIX)."""
    return posixpath.basename(path).startswith(SNAPSHOT_PREFIX)


def read_catalog_file(store: Store, path: str) -> CatalogFile:
    """Read and check one catalogue file; a file no row of which can be read is an InputError naming it."""
    try:
        records = reader_for(path, READERS)(store.read_bytes(path), path, None)
    except InputError as exc:  # which store, which bucket
        raise InputError(store.uri(path), exc.reason, exc.row) from None
    result = CatalogFile(path, is_snapshot(path), len(records))
    for record in records:
        try:
            if record.error is not None or record.values is None:
                raise RowError(record.error or "no values")
            result.rows.append(CatalogRow(record.line, record.raw, *check_row(record.values, result.snapshot)))
        except RowError as exc:
            result.rejected.append((record.line, str(exc), record.raw))
    return result


def check_row(values: Mapping[str, Any], snapshot: bool) -> tuple[str, bool, str, str, str]:
    """``(product_id, retire, title_raw, title, attributes)`` of a row; RowError with the reason."""
    product_id = _text(values, "product_id", MAX_ID_CHARS)
    op = values.get("op")
    if op is not None and not (isinstance(op, str) and op.strip().lower() in ("", *CATALOG_OPS)):
        raise RowError(f"field op: expected {' or '.join(CATALOG_OPS)}, got {preview(op)}")
    if op is not None and op.strip().lower() == "retire":
        if snapshot:
            raise RowError("field op: 'retire' in a snapshot, which lists the live products (leave a retired one out)")
        return product_id, True, "", "", "{}"
    title_raw = _text(values, "title", MAX_TITLE_CHARS)
    title = normalize(title_raw)
    if not title:
        raise RowError("field title: empty after normalisation")
    return product_id, False, title_raw, title, attributes(values)


def attributes(values: Mapping[str, Any]) -> str:
    """The row's other columns with a value, as a JSON object with sorted keys; RowError when it cannot be one."""
    extra = {name: value for name, value in values.items() if name not in _NAMED and value is not None and value != ""}
    try:
        text = json.dumps(extra, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RowError("attributes: not valid Unicode (a lone surrogate escape)") from None
    except ValueError as exc:
        raise RowError(f"attributes: {exc}") from None
    if len(text) > MAX_FIELD_CHARS:
        raise RowError(f"attributes: {len(text)} characters as JSON, over the limit of {MAX_FIELD_CHARS}")
    return text


def _text(values: Mapping[str, Any], name: str, limit: int) -> str:
    value = values.get(name)
    if value is None:
        raise RowError(f"field {name}: missing or null")
    check_string(name, value)
    if len(value) > limit:
        raise RowError(f"field {name}: {len(value)} characters, over the limit of {limit}")
    return value
