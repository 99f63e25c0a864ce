"""A catalogue landing file read as a stream of records: the click readers' rules, never the whole file in memory.

The click ingest's readers (:mod:`pipeline.ingest.formats`) take a file's bytes whole; a catalogue file is read in
bounded pieces instead, with the same rules and reasons (:mod:`pipeline.ingest.formats.records`), so that what
reading holds is a chunk and a row, whatever the size of the file:

* a text file (CSV, TSV, JSON Lines) is read :data:`CHUNK_BYTES` at a time and cut into lines; a line longer than
  :data:`~pipeline.ingest.formats.records.MAX_LINE_BYTES` is quarantined unread (its first
  :data:`~pipeline.storage.quarantine.RAW_LIMIT_BYTES` kept as its raw text), as the readers quarantine it. A CSV row
  spread over lines (a quoted line break) that grows past that bound is quarantined as over-long where it does,
  and reading starts a new row on the next line. Whether the file is UTF-8 is decided over all its lines, as the
  readers decide it, once the last one is read (before anything is written);
* a Parquet file is read :data:`BATCH_ROWS` rows at a time through a :data:`CHUNK_BYTES` buffer.
"""
from __future__ import annotations

import csv
import io
from typing import Callable, Iterable, Iterator, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import InputError
from pipeline.ingest.formats import RawRecord, reader_for
from pipeline.ingest.formats.delimited import delimited_record, read_header
from pipeline.ingest.formats.jsonl import LINE_NOT_UTF8, line_record
from pipeline.ingest.formats.parquet import table_records
from pipeline.ingest.formats.records import MAX_LINE_BYTES, NOT_UTF8, check_encoding, require_bytes
from pipeline.storage.quarantine import RAW_LIMIT_BYTES
from pipeline.storage.schemas import CATALOG_LANDING_COLUMNS
from pipeline.storage.store import Store

#: Bytes read from the store at a time.
CHUNK_BYTES = 1 << 20
#: Rows of a Parquet file turned into records at a time.
BATCH_ROWS = 1024
_BOM = b"\xef\xbb\xbf"


class Line(NamedTuple):
    """One line of a text file, without its line break: all its bytes, or only the first RAW_LIMIT_BYTES of a line
    over MAX_LINE_BYTES (``size`` is always its length)."""

    number: int
    data: bytes
    size: int
    ended: bool  # it ends with a line break (the last line of a file may not)


class _TooLong(Exception):
    """A CSV row grew past MAX_LINE_BYTES: ``first`` is its first line, ``size`` its bytes, ``head`` its start."""

    def __init__(self, first: int, size: int, head: bytes) -> None:
        super().__init__(first, size)
        self.first, self.size, self.head = first, size, head


def landing_records(store: Store, path: str) -> Iterator[RawRecord]:
    """Every row of the catalogue file at ``path`` as a record, read in bounded pieces; an InputError names the file
    (by its URI) when no row of it can be read."""
    source = store.uri(path)
    try:
        yield from reader_for(path, _READERS)(store, path)
    except InputError as exc:  # which store, which bucket
        raise InputError(source, exc.reason, exc.row) from None


def text_lines(chunks: Iterable[bytes]) -> Iterator[Line]:
    """The lines of a file given as chunks of bytes (a UTF-8 byte-order mark at the start dropped), each held whole
    only when it is within MAX_LINE_BYTES."""
    number, parts, size, ended = 0, [], 0, True
    for k, chunk in enumerate(chunks):
        ended = chunk.endswith(b"\n")
        pieces = (chunk.removeprefix(_BOM) if k == 0 else chunk).split(b"\n")
        for piece in pieces[:-1]:
            number += 1
            if not size and len(piece) <= MAX_LINE_BYTES:  # the usual line: whole in this chunk
                yield Line(number, piece, len(piece), True)
                continue
            parts, size = _grown(parts, size, piece)
            yield Line(number, b"".join(parts), size, True)
            parts, size = [], 0
        parts, size = _grown(parts, size, pieces[-1])
    if not ended:  # a last line without a line break
        yield Line(number + 1, b"".join(parts), size, False)


def _grown(parts: list[bytes], size: int, piece: bytes) -> tuple[list[bytes], int]:
    """The pieces of a line and its size with ``piece`` added; past MAX_LINE_BYTES only its start is kept."""
    if size <= MAX_LINE_BYTES:
        parts.append(piece)
    size += len(piece)
    if size > MAX_LINE_BYTES and (len(parts) > 1 or len(parts[0]) > RAW_LIMIT_BYTES):
        parts = [b"".join(parts)[:RAW_LIMIT_BYTES]]
    return parts, size


def _chunks(store: Store, path: str) -> Iterator[bytes]:
    """The file's bytes, CHUNK_BYTES at a time (an empty or UTF-16/32 file stops with an InputError)."""
    with store.open_input(path) as src:
        chunk = src.read(CHUNK_BYTES)
        require_bytes(path, chunk)
        while chunk:
            yield chunk
            chunk = src.read(CHUNK_BYTES)


def _too_long(number: int, head: bytes, size: int, what: str) -> RawRecord:
    """The record of a line or row over MAX_LINE_BYTES, as the readers word it."""
    return RawRecord(number, head[:RAW_LIMIT_BYTES].decode("utf-8", "backslashreplace"), None,
                     f"{what} of {size} bytes is over the limit of {MAX_LINE_BYTES} bytes")


def jsonl_records(store: Store, path: str) -> Iterator[RawRecord]:
    """Every line of a JSON Lines file as a record (:func:`pipeline.ingest.formats.jsonl.line_record`)."""
    bad, total = [], 0
    for line in text_lines(_chunks(store, path)):
        total += 1
        record = _too_long(line.number, line.data, line.size, "line") if line.size > MAX_LINE_BYTES \
            else line_record(line.number, line.data)
        if record.error == LINE_NOT_UTF8:
            bad.append(line.number)
        yield record
    check_encoding(path, bad, total)


class _RowLines:
    """The lines of a delimited file decoded for ``csv.reader`` (split at a lone carriage return, as the readers
    split them), keeping those of the row being read; a row past MAX_LINE_BYTES raises :class:`_TooLong`."""

    def __init__(self, lines: Iterator[Line]) -> None:
        self._queue: list[str]
        self._lines, self._queue = lines, []  # the lines to come; those a line split at a lone \r still to give
        self.count, self.first, self.size, self.bad = 0, 1, 0, False  # lines given; the row's first, bytes, not UTF-8
        self.texts: list[str] = []

    def __iter__(self) -> "_RowLines":
        return self

    def start_row(self) -> None:
        """The next line starts a new row."""
        self.first, self.size, self.bad, self.texts = self.count + 1, 0, False, []

    def __next__(self) -> str:
        if not self._queue:
            line = next(self._lines)
            self.size += line.size + line.ended
            if self.size > MAX_LINE_BYTES + line.ended:
                cut = _TooLong(self.first, self.size - line.ended,
                               "".join(self.texts).encode("utf-8", "surrogateescape") + line.data)
                self.count += 1
                self.start_row()
                raise cut
            try:
                text = line.data.decode("utf-8")
            except UnicodeDecodeError:
                text, self.bad = line.data.decode("utf-8", "surrogateescape"), True
            text += "\n" if line.ended else ""
            self._queue = list(io.StringIO(text, newline="")) if "\r" in text[:-2] else [text]
            self._queue.reverse()
        self.count += 1
        text = self._queue.pop()
        self.texts.append(text)
        return text

    def raw(self) -> str:
        """The source text of the row read, without its line break (undecodable bytes as \\xNN escapes)."""
        raw = "".join(self.texts).rstrip("\r\n")
        return raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if self.bad else raw


def delimited_records(store: Store, path: str, delimiter: str) -> Iterator[RawRecord]:
    """Every data row of a CSV or TSV file whose header has the catalogue's columns, as a record
    (:func:`pipeline.ingest.formats.delimited.delimited_record`)."""
    lines = _RowLines(text_lines(_chunks(store, path)))
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        header = read_header(path, reader, CATALOG_LANDING_COLUMNS)
    except _TooLong as cut:
        raise InputError(path, f"unreadable header: a line of {cut.size} bytes, over the limit of {MAX_LINE_BYTES}",
                         row=1) from None
    bad: list[int] = []
    while True:
        lines.start_row()
        try:
            fields = next(reader)
        except StopIteration:
            break
        except _TooLong as cut:
            yield _too_long(cut.first, cut.head, cut.size, "row")
            continue
        except csv.Error as exc:
            yield RawRecord(lines.first, lines.raw()[:RAW_LIMIT_BYTES], None, f"unparsable row: {exc}")
            continue
        if lines.bad:
            bad.append(lines.first)
            yield RawRecord(lines.first, lines.raw(), None, f"row is {NOT_UTF8}")
            continue
        yield delimited_record(lines.first, lines.raw(), fields, header)
    check_encoding(path, bad, max(lines.count - 1, 1))


def parquet_records(store: Store, path: str) -> Iterator[RawRecord]:
    """Every row of a Parquet file with the catalogue's columns (and any other) as a record
    (:func:`pipeline.ingest.formats.parquet.table_records`), BATCH_ROWS at a time."""
    with store.open_input(path, random_access=True) as src:
        require_bytes(path, src.read(4))
        try:
            file = pq.ParquetFile(src, buffer_size=CHUNK_BYTES, pre_buffer=False)
            missing = [name for name in CATALOG_LANDING_COLUMNS if name not in file.schema_arrow.names]
            if missing:
                raise InputError(path, f"missing column(s) {', '.join(missing)}; columns are {file.schema_arrow.names}")
            batches = file.iter_batches(batch_size=BATCH_ROWS)
            number = 1
            for batch in batches:
                yield from table_records(pa.Table.from_batches([batch]), range(number, number + batch.num_rows), path)
                number += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise InputError(path, f"unreadable Parquet: {exc}") from None


_READERS: dict[str, Callable[[Store, str], Iterator[RawRecord]]] = {
    ".csv": lambda store, path: delimited_records(store, path, ","),
    ".tsv": lambda store, path: delimited_records(store, path, "\t"),
    ".jsonl": jsonl_records, ".ndjson": jsonl_records, ".json": jsonl_records, ".parquet": parquet_records,
}
