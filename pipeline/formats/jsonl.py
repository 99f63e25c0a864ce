"""Reader for JSON Lines landing files: one JSON object per line, fields LANDING_FIELDS."""
from __future__ import annotations

import datetime as dt
import json

from pipeline.formats.records import (
    MAX_LINE_BYTES,
    NOT_UTF8,
    RawRecord,
    check_encoding,
    decode_line,
    require_bytes,
)


def read_jsonl(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every line of a JSONL file as a record; unparsable lines carry their reason.

    Blank lines are records too (reason "blank line"), so nothing is skipped silently. Unknown
    keys are ignored: engines add fields over time, the schema only requires LANDING_FIELDS.
    """
    require_bytes(source, data)
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    records: list[RawRecord] = []
    bad_encoding: list[int] = []
    for number, line in enumerate(lines, start=1):
        if len(line) > MAX_LINE_BYTES:
            preview = line[:4096].decode("utf-8", "backslashreplace")
            reason = f"line of {len(line)} bytes is over the limit of {MAX_LINE_BYTES} bytes"
            records.append(RawRecord(number, preview, None, reason))
            continue
        text, raw = decode_line(line)
        if text is None:
            bad_encoding.append(number)
            records.append(RawRecord(number, raw, None, f"line is {NOT_UTF8}"))
        elif not text.strip():
            records.append(RawRecord(number, raw, None, "blank line"))
        else:
            records.append(_parse(number, text))
    check_encoding(source, bad_encoding, len(lines))
    return records


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
