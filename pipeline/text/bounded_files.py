"""Users' files read within bounds: streamed in chunks, so a signal ends the read at once, and stopped with one line
past its :class:`FileBounds` (a file a user names: ``search --queries``, a judged set)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pipeline.core.errors import InputError
from pipeline.core.readable import readable_bytes


@dataclass(frozen=True)
class FileBounds:
    """How much of a user's file is read: its size, its lines and the bytes of one line."""

    what: str
    max_bytes: int
    max_lines: int
    max_line_bytes: int


#: ``deepsent search --queries``: one query a line.
QUERY_FILE = FileBounds("a file of queries", 100_000_000, 1_000_000, 4_000)
#: A judged set (``--judgments``, ``--gate-judgments``, the data folder's): one judgment a line.
JUDGED_FILE = FileBounds("a judged set", 1_000_000_000, 5_000_000, 100_000)
_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"


def bounded_lines(path: str | Path, bounds: FileBounds, encoding: str = "utf-8") -> Iterator[str]:
    """Each line of ``path`` with its line break, read in chunks within ``bounds`` (a UTF-8 byte-order mark at the
    start dropped); past a bound, or on a line that is not ``encoding``, an InputError names the file, the line
    and the bound. OSErrors of opening the file reach the caller."""
    total = count = 0
    pending, first = b"", True
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(_CHUNK)
            if first and chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
            total, first = total + len(chunk), False
            if total > bounds.max_bytes:
                raise InputError(str(path), f"more than {readable_bytes(bounds.max_bytes)}, the most deepsent reads "
                                 f"of {bounds.what}; split it")
            if not chunk:  # the end: a last line without a line break
                if pending:
                    yield _line(path, bounds, pending, count + 1, encoding)
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                count += 1
                yield _line(path, bounds, raw, count, encoding) + "\n"
            if len(pending) > bounds.max_line_bytes:
                _line(path, bounds, pending, count + 1, encoding)


def _line(path: str | Path, bounds: FileBounds, raw: bytes, number: int, encoding: str) -> str:
    """Line ``number`` decoded, within the bounds of a line and of the line count."""
    if number > bounds.max_lines:
        raise InputError(str(path), f"more than {bounds.max_lines:,} lines, the most deepsent reads of {bounds.what}; "
                         "split it", row=number)
    if len(raw) > bounds.max_line_bytes:
        raise InputError(str(path), f"a line longer than {bounds.max_line_bytes:,} bytes, the longest deepsent reads "
                         f"in {bounds.what}", row=number)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not {encoding.upper()} text ({exc.reason} at byte {exc.start} of the line)",
                         row=number) from None
