"""Reader for JSON Lines landing files: one JSON object per line, fields LANDING_FIELDS."""
from __future__ import annotations

import datetime as dt
import json

from pipeline.ingest.formats.records import (
    MAX_LINE_BYTES,
    NOT_UTF8,
    RawRecord,
    check_encoding,
    decode_line,
    require_bytes,
)

LINE_NOT_UTF8 = f"line is {NOT_UTF8}"


def read_jsonl(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every line of a JSONL file as a record; unparsable lines carry their reason.

    Blank lines are records too (reason "blank line"), so nothing is skipped silently. Unknown
    keys are ignored: engines add fields over time, the schema only requires LANDING_FIELDS.
    """
    require_bytes(source, data)
    lines = split_lines(data)
    records = [line_record(number, line) for number, line in enumerate(lines, start=1)]
    check_encoding(source, [r.line for r in records if r.error == LINE_NOT_UTF8], len(lines))
    return records


def split_lines(data: bytes) -> list[bytes]:
    """The lines of a JSONL file (no final empty line after the last newline; a UTF-8 BOM dropped)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    return lines


def line_record(number: int, line: bytes) -> RawRecord:
    """One line of a JSONL file as a record: its parsed object, or why it has none."""
    if len(line) > MAX_LINE_BYTES:
        preview = line[:4096].decode("utf-8", "backslashreplace")
        return RawRecord(number, preview, None, f"line of {len(line)} bytes is over the limit of {MAX_LINE_BYTES} bytes")
    text, raw = decode_line(line)
    if text is None:
        return RawRecord(number, raw, None, LINE_NOT_UTF8)
    if not text.strip():
        return RawRecord(number, raw, None, "blank line")
    return _parse(number, text)


def _parse(number: int, text: str) -> RawRecord:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return RawRecord(number, text, None, f"invalid JSON: {exc.msg} (column {exc.colno})")
    except RecursionError:
        return RawRecord(number, text, None, "invalid JSON: arrays or objects nested too deeply")
    except ValueError as exc:  # an integer literal of more than 4300 digits
        return RawRecord(number, text, None, f"invalid JSON: {str(exc).split(':')[0]}")
    if not isinstance(obj, dict):
        return RawRecord(number, text, None, f"expected a JSON object, got {type(obj).__name__}")
    return RawRecord(number, text, obj)
