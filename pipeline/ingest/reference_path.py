"""The per-line ingestion path: every record of a landing file checked one by one in Python.

This is the reference: :mod:`pipeline.ingest.arrow_path` must give the same bytes, and hands it every
line it is not sure about. A file is turned into a :class:`FileResult` (its candidate click rows
in line order, each with its ``event_id``, and its quarantined records); de-duplication and bot
removal happen afterwards over the whole date (:func:`pipeline.ingest.ingest.ingest_partition`).
"""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa

from pipeline.ingest.formats import LandingRow, RawRecord, RowError, reader_for, to_landing_row
from pipeline.storage.schemas import CLICKS_SCHEMA
from pipeline.text.textnorm import normalize

#: One quarantined record: (line, reason, raw text).
Rejected = tuple[int, str, str]


@dataclass
class FileResult:
    """What one landing file yields: candidate click rows (CLICKS_SCHEMA, line order) and rejected records."""

    path: str
    rows_read: int
    rows: pa.Table
    rejected: list[Rejected] = field(default_factory=list)


def read_file_per_line(data: bytes, path: str, day: dt.date) -> FileResult:
    """The reference path: the format's reader, then :func:`check_records` on every record."""
    records = reader_for(path)(data, path, day)
    rows, rejected = check_records(records, path, day)
    return FileResult(path, len(records), rows, rejected)


def check_records(records: Iterable[RawRecord], path: str, day: dt.date) -> tuple[pa.Table, list[Rejected]]:
    """Validate and normalise ``records`` one by one: the accepted rows as a table, and the rejected ones."""
    columns = _ClickColumns()
    rejected: list[Rejected] = []
    for record in records:
        if record.error is not None or record.values is None:
            rejected.append((record.line, record.error or "no values", record.raw))
            continue
        try:
            row = to_landing_row(record.values, day)
            query, title = columns.normalise(row)
        except RowError as exc:
            rejected.append((record.line, str(exc), record.raw))
            continue
        columns.add(event_id(row), row, query, title, path, record.line)
    return columns.to_table(), rejected


def event_id(row: LandingRow) -> str:
    """Stable id of a landing event: a hash of all its fields (same event, same id, any format)."""
    return hash_event_key("\x1f".join(str(value) for value in row).encode("utf-8"))


def hash_event_key(key: bytes) -> str:
    """The ``event_id`` of an event key (its fields joined by ``\\x1f``, as UTF-8)."""
    return hashlib.blake2b(key, digest_size=16).hexdigest()


class _ClickColumns:
    """Accepted rows of a file in line order, as CLICKS_SCHEMA tuples."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self._normal: dict[str, str] = {}

    def normalise(self, row: LandingRow) -> tuple[str, str]:
        """Normalised query and title of ``row``; RowError when one normalises to nothing."""
        query, title = self._norm(row.query), self._norm(row.title)
        if not query or not title:
            raise RowError(f"field {'query' if not query else 'title'}: empty after normalisation")
        return query, title

    def _norm(self, text: str) -> str:
        cached = self._normal.get(text)
        if cached is None:
            cached = self._normal[text] = normalize(text)
        return cached

    def add(self, key: str, row: LandingRow, query: str, title: str, source: str, line: int) -> None:
        """Append one accepted row."""
        ts, user, session, impression, query_raw, doc_id, title_raw, position, clicked = row
        self.rows.append((key, ts, user, session, impression, query_raw, query, doc_id, title_raw, title,
                          position, clicked, source, line))

    def to_table(self) -> pa.Table:
        """The rows as a CLICKS_SCHEMA table."""
        columns = list(zip(*self.rows)) if self.rows else [() for _ in CLICKS_SCHEMA.names]
        return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, CLICKS_SCHEMA)], schema=CLICKS_SCHEMA)
