"""What every landing reader yields, and the validation of a landing row against LANDING_FIELDS.

Readers turn a file into :class:`RawRecord` s (line number, source text, parsed values or the
reason they could not be parsed). :func:`to_landing_row` then checks the values against the
declared schema (:data:`pipeline.storage.schemas.LANDING_FIELDS`) and returns a typed
:class:`LandingRow`, or raises :class:`RowError` with a reason that goes to quarantine.

Policies shared by every text format (documented here once):

* A line (or CSV record) longer than :data:`MAX_LINE_BYTES` is quarantined unparsed: real rows
  are a few hundred bytes, so a 1 MB line is a broken writer, and parsing it would only waste
  memory. Any single field longer than :data:`MAX_FIELD_CHARS` is quarantined the same way.
* Landing files must be UTF-8. A few undecodable lines (at most one, or 0.1 % of the lines) are
  quarantined as corrupted writes; more than that means the file is in another encoding (the
  Latin-1 Home Depot file has 0.3 % non-ASCII lines), and reading stops with one
  :class:`~pipeline.core.errors.InputError` naming the file. Quarantining a few lines is safe because
  every other line is ASCII-only or valid UTF-8, so it was read correctly. A UTF-16/32
  byte-order mark also stops reading.
* An empty file (0 bytes) stops reading with an error: engines that saw no traffic write no
  file, so an empty one is a failed delivery that must not pass unnoticed.
* ``ts`` must fall within the landing date ± :data:`TS_TOLERANCE_DAYS` day: from UTC midnight
  of the day before to UTC midnight after the day after (any year 1..9999 or offset is read
  without overflow, then checked). A day's log holds that day's events; the extra day each side
  admits late or early flushes and any timezone skew (offsets reach ±14 h), while a year-1 or
  year-9999 stamp is a broken clock, not a click to train on.
* ``position`` is a 1-based rank from 1 to :data:`MAX_POSITION` (the int32 of CLICKS_SCHEMA);
  as text it must be ASCII digits only (``"²"`` or ``"٣"`` are not ranks).
"""
from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import Any, Mapping, NamedTuple

from pipeline.core.errors import InputError
from pipeline.storage.schemas import LANDING_FIELDS

MAX_LINE_BYTES = 64 * 1024
MAX_FIELD_CHARS = 16 * 1024
NOT_UTF8 = "not valid UTF-8"
MAX_POSITION = 2**31 - 1
TS_TOLERANCE_DAYS = 1
_DAY_MS = 86_400_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_FIELD_NAMES = tuple(LANDING_FIELDS)
LANDING_NAMES = _FIELD_NAMES  # the columns a click landing file must have
_STRING_FIELDS = _FIELD_NAMES[1:7]  # user_id .. title; LandingRow relies on this order
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")
_TRUE = frozenset({"true", "1", "t", "yes"})
_FALSE = frozenset({"false", "0", "f", "no"})


class RawRecord(NamedTuple):
    """One row of a landing file as read: parsed ``values``, or the ``error`` that prevented it."""

    line: int  # 1-based line (text formats) or row (Parquet) in the source file
    raw: str  # the source text of the row, for the quarantine
    values: Mapping[str, Any] | None
    error: str | None = None


class LandingRow(NamedTuple):
    """A landing row that passed validation (timestamps as UTC epoch milliseconds)."""

    ts_ms: int
    user_id: str
    session_id: str
    impression_id: str
    query: str
    doc_id: str
    title: str
    position: int
    clicked: bool


class RowError(ValueError):
    """A row that breaks the landing schema; the message is the quarantine reason."""


def to_landing_row(values: Mapping[str, Any], day: dt.date | None = None) -> LandingRow:
    """Check ``values`` against LANDING_FIELDS (``ts`` near ``day`` when given); RowError with the reason."""
    fetched = [values.get(name) for name in _FIELD_NAMES]
    if any(value is None for value in fetched):
        missing = [name for name, value in zip(_FIELD_NAMES, fetched) if value is None]
        raise RowError(f"missing or null field(s): {', '.join(missing)}")
    ts, user_id, session_id, impression_id, query, doc_id, title, position, clicked = fetched
    strings = (user_id, session_id, impression_id, query, doc_id, title)
    for name, value in zip(_STRING_FIELDS, strings):
        if type(value) is not str or len(value) > MAX_FIELD_CHARS or not value.isascii() or not value.strip():
            check_string(name, value)  # raises, or returns for valid non-ASCII text
    if type(position) is not int or not 1 <= position <= MAX_POSITION:
        position = _position(position)
    if type(clicked) is not bool:
        clicked = _clicked(clicked)
    ts_ms = _timestamp_ms(ts)
    if day is not None and not _in_window(ts_ms, day):
        text = ts.isoformat() if isinstance(ts, dt.datetime) else ts.strip()
        raise RowError(f"field ts: {preview(text)} is outside the landing date {day.isoformat()} ± {TS_TOLERANCE_DAYS} day (UTC)")
    return LandingRow(ts_ms, *strings, position, clicked)


def _in_window(ts_ms: int, day: dt.date) -> bool:
    """Whether ``ts_ms`` lies in [day - tolerance, day + 1 + tolerance) at UTC midnights (integer days: no overflow)."""
    start = (day.toordinal() - _EPOCH.toordinal() - TS_TOLERANCE_DAYS) * _DAY_MS
    return start <= ts_ms < start + (1 + 2 * TS_TOLERANCE_DAYS) * _DAY_MS


def check_string(name: str, value: Any) -> str:
    """``value`` when it is a non-blank string of at most MAX_FIELD_CHARS valid Unicode; else RowError naming ``name``."""
    if not isinstance(value, str):
        raise RowError(f"field {name}: expected a string, got {type(value).__name__} {preview(value)}")
    if not value.strip():
        raise RowError(f"field {name}: empty")
    if len(value) > MAX_FIELD_CHARS:
        raise RowError(f"field {name}: {len(value)} characters, over the limit of {MAX_FIELD_CHARS}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RowError(f"field {name}: not valid Unicode (a lone surrogate escape)") from None
    return value


def _position(value: Any) -> int:
    if isinstance(value, str) and (text := value.strip()).isascii() and text.isdigit():
        digits = text.lstrip("0") or "0"
        if len(digits) > len(str(MAX_POSITION)):  # int() of thousands of digits is refused by Python
            raise RowError(f"field position: {preview(digits)} is over the int32 limit of {MAX_POSITION}")
        value = int(digits)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RowError(f"field position: expected an integer, got {type(value).__name__} {preview(value)}")
    if value < 1:
        raise RowError(f"field position: {value} is not a 1-based rank")
    if value > MAX_POSITION:
        raise RowError(f"field position: {preview(value)} is over the int32 limit of {MAX_POSITION}")
    return value


def _clicked(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise RowError(f"field clicked: expected true/false or 0/1, got {preview(value)}")


def _timestamp_ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise RowError(f"field ts: {value.isoformat()} has no timezone")
        return epoch_ms(value)
    if not isinstance(value, str):
        raise RowError(f"field ts: expected an ISO-8601 string, got {type(value).__name__} {preview(value)}")
    try:
        return _parse_iso_ms(value.strip())
    except ValueError as exc:
        raise RowError(f"field ts: {exc}") from None


@lru_cache(maxsize=65536)
def _parse_iso_ms(text: str) -> int:
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{preview(text)} is not an ISO-8601 timestamp") from None
    if stamp.tzinfo is None:
        raise ValueError(f"{preview(text)} has no timezone")
    return epoch_ms(stamp)


def preview(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a quarantine reason."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def decode_line(line: bytes) -> tuple[str | None, str]:
    """``(text, raw)`` of one line: text is None when the bytes are not UTF-8 (raw shows them escaped)."""
    try:
        text = line.decode("utf-8")
        return text, text
    except UnicodeDecodeError:
        return None, line.decode("utf-8", "backslashreplace")


def check_encoding(source: str, bad_lines: list[int], total_lines: int) -> None:
    """Stop with an InputError when too many lines are not UTF-8 (see the module docstring)."""
    tolerated = max(1, total_lines // 1000)
    if len(bad_lines) > tolerated:
        raise InputError(
            source,
            f"wrong encoding: {len(bad_lines)} of {total_lines} lines are {NOT_UTF8} "
            f"(first at line {bad_lines[0]}); landing files must be UTF-8",
        )


def require_bytes(source: str, data: bytes) -> None:
    """Stop with an InputError when the file is empty (a failed delivery) or UTF-16/32 encoded."""
    if not data:
        raise InputError(source, "empty file (0 bytes): a landing file must hold at least one row")
    if data.startswith(_WIDE_BOMS):
        raise InputError(source, "wrong encoding: UTF-16/32 byte-order mark; landing files must be UTF-8")


def epoch_ms(stamp: dt.datetime) -> int:
    """UTC epoch milliseconds of an aware datetime."""
    return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)
