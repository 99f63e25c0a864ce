"""Readers for CSV and TSV landing files: a header row naming LANDING_FIELDS (or the columns a caller
requires, e.g. the catalogue's), then one row per line.

Values arrive as text; :func:`pipeline.ingest.formats.records.to_landing_row` converts them (``position``
from digits, ``clicked`` from true/false/1/0). Extra columns are ignored; a missing column stops
reading with an error naming the file, since no row of it could be valid.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Iterator, Sequence

from pipeline.core.errors import InputError
from pipeline.ingest.formats.records import (LANDING_NAMES, MAX_LINE_BYTES, NOT_UTF8, RawRecord, check_encoding,
                                             require_bytes)


def read_csv(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every data row of a comma-separated file as a record (line = first line of the row)."""
    return read_delimited(data, source, ",")


def read_tsv(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every data row of a tab-separated file as a record."""
    return read_delimited(data, source, "\t")


def read_delimited(data: bytes, source: str, delimiter: str, required: Sequence[str] = LANDING_NAMES) -> list[RawRecord]:
    """Parse a delimited file whose header has the ``required`` columns; malformed rows become records with a reason."""
    require_bytes(source, data)
    try:
        text, maybe_bad = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, maybe_bad = data.decode("utf-8", "surrogateescape"), True
    text = text.removeprefix("\ufeff")
    lines = list(io.StringIO(text, newline=""))
    reader = csv.reader(lines, delimiter=delimiter)
    header = read_header(source, reader, required)
    records: list[RawRecord] = []
    bad_encoding: list[int] = []
    while True:
        first = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raw = record_text(lines, first, reader.line_num)
            reason = _oversize(raw) or f"unparsable row: {exc}"
            records.append(RawRecord(first, _printable(raw[:4096]), None, reason))
            continue
        raw = record_text(lines, first, reader.line_num)
        if maybe_bad and _has_surrogates(raw):
            bad_encoding.append(first)
            records.append(RawRecord(first, _printable(raw), None, f"row is {NOT_UTF8}"))
            continue
        records.append(delimited_record(first, raw, fields, header))
    check_encoding(source, bad_encoding, max(len(lines) - 1, 1))
    return records


def read_header(source: str, reader: Iterator[list[str]], required: Sequence[str] = LANDING_NAMES) -> list[str]:
    """The header row; an InputError naming the file when it is unreadable or lacks a ``required`` column."""
    try:
        header = [name.strip() for name in next(reader)]
    except (StopIteration, csv.Error) as exc:
        raise InputError(source, f"unreadable header: {exc or 'no header row'}", row=1) from None
    if any(_has_surrogates(name) for name in header):
        raise InputError(source, f"wrong encoding: the header is {NOT_UTF8}", row=1)
    missing = [name for name in required if name not in header]
    if missing:
        raise InputError(source, f"missing column(s) {', '.join(missing)}; header is {header}", row=1)
    return header


def _oversize(raw: str) -> str | None:
    """The quarantine reason when a row is longer than MAX_LINE_BYTES, else None."""
    if len(raw) * 4 <= MAX_LINE_BYTES:  # a character is at most 4 bytes: only long rows are measured
        return None
    size = len(raw.encode("utf-8", "surrogateescape"))
    return f"row of {size} bytes is over the limit of {MAX_LINE_BYTES} bytes" if size > MAX_LINE_BYTES else None


def delimited_record(line: int, raw: str, fields: list[str], header: list[str]) -> RawRecord:
    """One parsed row (first line ``line``, source text ``raw``) as a record, or why it is not one."""
    oversize = _oversize(raw)
    if oversize:
        return RawRecord(line, _printable(raw[:4096]), None, oversize)
    if not fields:
        return RawRecord(line, raw, None, "blank line")
    if len(fields) != len(header):
        return RawRecord(line, raw, None, f"{len(fields)} fields, expected {len(header)} as in the header")
    return RawRecord(line, raw, dict(zip(header, fields)))


def record_text(lines: list[str], first: int, last: int) -> str:
    """The source text of the row on lines ``first``..``last`` (1-based), without its line break."""
    return "".join(lines[first - 1 : max(last, first)]).rstrip("\r\n")


def _has_surrogates(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _printable(text: str) -> str:
    """Undecodable bytes (kept as surrogates) shown as \\xNN escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
