"""Readers of landing files, one module per format, chosen by file extension.

Every reader has the signature ``read(data, source, partition_date) -> list[RawRecord]``:
``data`` is the file's bytes, ``source`` its path relative to the store root (used in every
error and quarantine row), ``partition_date`` the landing partition's date (only the TREC
Session XML needs it, to turn relative times into timestamps).
"""
from __future__ import annotations

import datetime as dt
import posixpath
from typing import Callable, Mapping

from pipeline.core.errors import InputError
from pipeline.ingest.formats.delimited import read_csv, read_tsv
from pipeline.ingest.formats.jsonl import read_jsonl
from pipeline.ingest.formats.parquet import read_parquet
from pipeline.ingest.formats.records import LandingRow, RawRecord, RowError, to_landing_row
from pipeline.ingest.formats.trec_xml import read_trec_xml

Reader = Callable[[bytes, str, "dt.date | None"], list[RawRecord]]

READERS: dict[str, Reader] = {
    ".jsonl": read_jsonl,
    ".ndjson": read_jsonl,
    ".json": read_jsonl,
    ".csv": read_csv,
    ".tsv": read_tsv,
    ".parquet": read_parquet,
    ".xml": read_trec_xml,
}

__all__ = ["READERS", "LandingRow", "RawRecord", "Reader", "RowError", "reader_for", "to_landing_row"]


def reader_for(path: str, readers: Mapping[str, Reader] = READERS) -> Reader:
    """The reader for ``path`` by its extension among ``readers``; an unknown one is an InputError naming the file."""
    extension = posixpath.splitext(path)[1].lower()
    try:
        return readers[extension]
    except KeyError:
        known = ", ".join(sorted(readers))
        raise InputError(path, f"unsupported file type {extension or '(none)'!r}; expected one of {known}") from None
