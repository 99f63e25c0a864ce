"""Column-wise validation, normalisation and hashing of landing rows (the vectorised ingest path).

Input: one landing file as Arrow columns (``line``, ``ts`` text, the six string fields,
``position`` as integers or text, ``clicked`` as booleans or text), as the readers of
:mod:`pipeline.ingest.arrow_path` decode them. A row is accepted here only when it is certainly valid
under the rules of :func:`pipeline.ingest.formats.records.to_landing_row`, in a narrow form checked
with pyarrow compute; every other row is returned as *unsure* and goes through the per-line path
(:mod:`pipeline.ingest.reference_path`), which accepts it or names the reason. Sure means:

* the six string fields non-null, ASCII, at most MAX_FIELD_CHARS long and not blank (blank as
  Python's ``str.strip`` sees ASCII: space, ``\\t\\n\\v\\f\\r`` and ``\\x1c``-``\\x1f``);
* ``ts`` exactly ``YYYY-MM-DDTHH:MM:SS[.fff|.ffffff](Z|±HH:MM)``, a real date and time (year 1
  or later, no leap second, offset under 24 h), within the landing date ± 1 day;
* ``position`` an integer 1..2^31-1 (text: ASCII digits without a leading zero);
* ``clicked`` a boolean, or the text ``true``, ``false``, ``1`` or ``0``.

For ASCII text, Python's ``" ".join(text.lower().split())`` (the paper's normalisation, NFC
changes no ASCII text) is ASCII lower case, each run of that whitespace to one space, and the
spaces at both ends trimmed: computed once per distinct query or title. The ``event_id`` is the
blake2b of the same ``\\x1f``-joined key as the per-line path; only that hash runs per row
(:func:`hex_digests`).
"""
from __future__ import annotations

import binascii
import datetime as dt
import hashlib
from functools import partial
from operator import methodcaller

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.ingest.formats.records import MAX_FIELD_CHARS, MAX_POSITION, TS_TOLERANCE_DAYS, epoch_ms
from pipeline.storage.schemas import CLICKS_SCHEMA, LANDING_FIELDS

STRING_FIELDS = tuple(LANDING_FIELDS)[1:7]  # user_id .. title
_ASCII_SPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f ]"
_ASCII_SPACE_CHARS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
_TS = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3}|\.[0-9]{6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
_POSITION_TEXT = r"^[1-9][0-9]{0,9}$"
_DAY_MS = 86_400_000
_DAYS_IN_MONTH = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def check_columns(columns: pa.Table, path: str, day: dt.date) -> tuple[pa.Table, np.ndarray]:
    """The certainly valid rows as CLICKS_SCHEMA rows of ``path``, and the lines of every other row."""
    sure = np.ones(columns.num_rows, dtype=bool)
    for name in STRING_FIELDS:
        sure &= _sure_text(columns.column(name))
    ts_ms, ts_ok = _distinct_timestamps_ms(columns.column("ts"), day)
    position, position_ok = _positions(columns.column("position"))
    clicked, clicked_ok = _clicked(columns.column("clicked"))
    sure &= ts_ok & position_ok & clicked_ok
    unsure_lines = columns.column("line").to_numpy()[~sure]
    if not sure.all():
        keep = pa.array(sure)
        columns = columns.filter(keep)
        ts_ms, position, clicked = ts_ms[sure], position[sure], clicked.filter(keep)
    return _click_rows(columns, ts_ms, position, clicked, path), unsure_lines


def _click_rows(columns: pa.Table, ts_ms: np.ndarray, position: np.ndarray, clicked: pa.Array, path: str) -> pa.Table:
    text = {name: _flat(columns.column(name)) for name in STRING_FIELDS}
    ts_col, position_col = pa.array(ts_ms, pa.int64()), pa.array(position, pa.int64())
    key = pc.binary_join_element_wise(
        ts_col.cast(pa.string()), *(text[name] for name in STRING_FIELDS), position_col.cast(pa.string()),
        pc.if_else(clicked, "True", "False"), "\x1f",
    )
    event_ids = hex_digests(key.cast(pa.binary()).to_pylist())
    values = {
        "event_id": event_ids,
        "ts": ts_col.cast(pa.timestamp("ms", tz="UTC")),
        "user_id": text["user_id"], "session_id": text["session_id"], "impression_id": text["impression_id"],
        "query_raw": text["query"], "query": normalise_ascii(text["query"]), "doc_id": text["doc_id"],
        "title_raw": text["title"], "title": normalise_ascii(text["title"]),
        "position": position_col.cast(pa.int32()), "clicked": clicked,
        "source_file": pa.array([path] * columns.num_rows, pa.string()),
        "source_line": _flat(columns.column("line")).cast(pa.int64()),
    }
    return pa.table([values[name] for name in CLICKS_SCHEMA.names], schema=CLICKS_SCHEMA)


def hex_digests(keys: list[bytes]) -> pa.Array:
    """The per-line path's ``event_id`` of each key (blake2b, 16 bytes, as hex) without a Python step per row.

    The digests are taken by ``map`` (C-level iteration), joined, hex-encoded at once and cut
    into 32-character strings by offsets.
    """
    digests = b"".join(map(methodcaller("digest"), map(partial(hashlib.blake2b, digest_size=16), keys)))
    offsets = np.arange(0, 32 * len(keys) + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(len(keys), pa.py_buffer(offsets), pa.py_buffer(binascii.hexlify(digests)))


def normalise_ascii(texts: pa.Array) -> pa.Array:
    """:func:`pipeline.text.textnorm.normalize` of ASCII texts, computed once per distinct text."""
    encoded = pc.dictionary_encode(texts)
    lower = pc.ascii_lower(encoded.dictionary)
    untidy = pc.or_(pc.or_(pc.invert(pc.ascii_is_printable(lower)), pc.match_substring(lower, "  ")),
                    pc.or_(pc.starts_with(lower, " "), pc.ends_with(lower, " ")))
    if pc.any(untidy).as_py():  # runs of spaces or other whitespace: the regex only where they are
        tidied = pc.ascii_trim(pc.replace_substring_regex(lower.filter(untidy), _ASCII_SPACE + "+", " "), " ")
        lower = pc.replace_with_mask(lower, untidy, tidied)
    return pc.take(lower, encoded.indices)


def _distinct_timestamps_ms(texts: pa.ChunkedArray | pa.Array, day: dt.date) -> tuple[np.ndarray, np.ndarray]:
    """:func:`timestamps_ms` computed once per distinct text (the rows of a search share one)."""
    texts = _flat(texts)
    if not pa.types.is_string(texts.type) or texts.null_count:
        return timestamps_ms(texts, day)
    encoded = pc.dictionary_encode(texts)
    codes = encoded.indices.to_numpy()
    stamps, ok = timestamps_ms(encoded.dictionary, day)
    return stamps[codes], ok[codes]


def timestamps_ms(texts: pa.ChunkedArray | pa.Array, day: dt.date) -> tuple[np.ndarray, np.ndarray]:
    """UTC epoch ms of ISO-8601 texts of the strict form, and where that form held and fell near ``day``."""
    texts = _flat(texts)
    if not pa.types.is_string(texts.type):
        return np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=bool)
    form_ok = _filled(pc.match_substring_regex(texts, _TS))
    safe = pc.if_else(pa.array(form_ok), texts, "1970-01-01T00:00:00Z")

    def number(start: int, stop: int | None) -> np.ndarray:
        return pc.cast(pc.utf8_slice_codeunits(safe, start, stop), pa.int64()).to_numpy()

    year, month, mday, hour, minute, second = (number(a, a + w) for a, w in ((0, 4), (5, 2), (8, 2), (11, 2), (14, 2), (17, 2)))
    fraction = pc.equal(pc.utf8_slice_codeunits(safe, 19, 20), ".")
    millis = pc.cast(pc.if_else(fraction, pc.utf8_slice_codeunits(safe, 20, 23), "0"), pa.int64()).to_numpy()
    zulu = pc.ends_with(safe, "Z").to_numpy(zero_copy_only=False)
    zone = pc.if_else(pa.array(zulu), "+00:00", pc.utf8_slice_codeunits(safe, -6, None))
    zone_hours, zone_minutes = (pc.cast(pc.utf8_slice_codeunits(zone, a, b), pa.int64()).to_numpy() for a, b in ((1, 3), (4, 6)))
    sign = np.where(pc.starts_with(zone, "-").to_numpy(zero_copy_only=False), -1, 1)
    valid = (form_ok & (year >= 1) & (month >= 1) & (month <= 12) & (mday >= 1) & (mday <= _month_days(year, month))
             & (hour <= 23) & (minute <= 59) & (second <= 59) & (zone_hours <= 23) & (zone_minutes <= 59))
    stamp = (days_from_civil(year, month, mday) * _DAY_MS + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis
             - sign * (zone_hours * 60 + zone_minutes) * 60_000)
    start = epoch_ms(dt.datetime.combine(day - dt.timedelta(days=TS_TOLERANCE_DAYS), dt.time(), dt.timezone.utc))
    in_window = (stamp >= start) & (stamp < start + (1 + 2 * TS_TOLERANCE_DAYS) * _DAY_MS)
    return stamp, valid & in_window


def days_from_civil(year: np.ndarray, month: np.ndarray, mday: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm, vectorised)."""
    year = year - (month <= 2)
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * ((month + 9) % 12) + 2) // 5 + mday - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _month_days(year: np.ndarray, month: np.ndarray) -> np.ndarray:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    return _DAYS_IN_MONTH[np.clip(month, 1, 12) - 1] + ((month == 2) & leap)


def _sure_text(texts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    texts = _flat(texts)
    if not pa.types.is_string(texts.type):
        return np.zeros(len(texts), dtype=bool)
    ascii_ok = pc.and_(pc.string_is_ascii(texts), pc.less_equal(pc.binary_length(texts), MAX_FIELD_CHARS))
    not_blank = pc.greater(pc.binary_length(pc.ascii_trim(texts, _ASCII_SPACE_CHARS)), 0)
    return _filled(pc.and_(ascii_ok, not_blank))


def _positions(values: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    values = _flat(values)
    if pa.types.is_string(values.type):
        form_ok = _filled(pc.match_substring_regex(values, _POSITION_TEXT))
        values = pc.if_else(pa.array(form_ok), values, "0")
    elif not pa.types.is_signed_integer(values.type):
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    numbers = pc.cast(values, pa.int64()).fill_null(0).to_numpy()
    return numbers, (numbers >= 1) & (numbers <= MAX_POSITION)


def _clicked(values: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, np.ndarray]:
    values = _flat(values)
    if pa.types.is_boolean(values.type):
        return values.fill_null(False), ~values.is_null().to_numpy(zero_copy_only=False)
    if not pa.types.is_string(values.type):
        return pa.nulls(len(values), pa.bool_()).fill_null(False), np.zeros(len(values), dtype=bool)
    known = _filled(pc.is_in(values, value_set=pa.array(["true", "false", "1", "0"])))
    return _filled_array(pc.is_in(values, value_set=pa.array(["true", "1"]))), known


def _flat(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _filled(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return _filled_array(mask).to_numpy(zero_copy_only=False)


def _filled_array(mask: pa.Array | pa.ChunkedArray) -> pa.Array:
    return _flat(mask).fill_null(False)
