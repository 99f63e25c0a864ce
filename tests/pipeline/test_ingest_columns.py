"""The column-wise pieces of the vectorised ingest path agree with their per-row references."""
from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pytest

from pipeline.ingest.bot_columns import find_bots_columns
from pipeline.ingest.bots import find_bots
from pipeline.ingest.columns import days_from_civil, normalise_ascii, timestamps_ms
from pipeline.ingest.formats.records import RowError, to_landing_row
from pipeline.text.textnorm import normalize

DAY = dt.date(2026, 1, 1)


def reference_ms(text: str) -> int | None:
    """The per-line path's epoch ms of ``text`` as the ``ts`` of a row of DAY, or None when it quarantines it."""
    values = {"ts": text, "user_id": "u", "session_id": "s", "impression_id": "i", "query": "q", "doc_id": "d",
              "title": "t", "position": 1, "clicked": True}
    try:
        return to_landing_row(values, DAY).ts_ms
    except RowError:
        return None


def test_timestamps_agree_with_the_per_line_parser_wherever_they_are_sure() -> None:
    rng = random.Random(5)
    texts = ["2026-01-01T10:00:00Z", "2026-01-01T10:00:00.5Z", "2025-12-31T00:00:00.000+00:00", "2026-01-02T23:59:59.999999-00:00",
             "2026-01-03T00:59:00+01:00", "2026-01-02T23:00:00-01:00", "2026-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "yesterday",
             "2026-01-01T10:00:00+23:59", "2026-01-01T24:00:00Z", "2026-01-01T10:00:00 Z", "2026-01-01t10:00:00Z", ""]
    for _ in range(3000):
        near = DAY + dt.timedelta(days=rng.randint(-3, 3))
        y, mo, d = rng.choice([(near.year, near.month, near.day)] * 4 + [(2024, 2, 30), (1, 1, 1), (9999, 12, 31), (2026, 13, 1), (2026, 1, 0)])
        zone = rng.choice(["Z", "+00:00", "-12:00", "+14:00", "+05:30", "-00:01", "+24:00", "+23:60"])
        frac = rng.choice(["", ".123", ".999999", ".12"])
        texts.append(f"{y:04d}-{mo:02d}-{d:02d}T{rng.randint(0, 24):02d}:{rng.randint(0, 60):02d}:{rng.randint(0, 60):02d}{frac}{zone}")
    stamps, sure = timestamps_ms(pa.array(texts), DAY)
    reference = [reference_ms(t) for t in texts]
    assert sure.sum() > 250  # the rest are out of range, out of the window or not of the strict form
    for text, stamp, ok, expected in zip(texts, stamps.tolist(), sure.tolist(), reference):
        if ok:
            assert stamp == expected, text


def test_days_from_civil_matches_the_calendar() -> None:
    days = np.arange(-800_000, 2_900_000, 997)
    dates = [dt.date.fromordinal(int(k) + dt.date(1970, 1, 1).toordinal()) for k in days if int(k) + 719_163 >= 1]
    got = days_from_civil(*(np.array([getattr(d, f) for d in dates]) for f in ("year", "month", "day")))
    assert got.tolist() == [(d - dt.date(1970, 1, 1)).days for d in dates]


@pytest.mark.parametrize("text", ["Cordless  DRILL 20v", " a\tb\n", "x\x1cy\x1dz\x1e\x1fw", "ALL CAPS", "\x0bv\x0cf\r", "a", "  lead", "trail  "])
def test_ascii_normalisation_is_the_papers(text: str) -> None:
    assert normalise_ascii(pa.array([text, text.upper()])).to_pylist() == [normalize(text), normalize(text.upper())]


@pytest.mark.parametrize("seed", range(6))
def test_bots_found_column_wise_are_the_loops_bots(seed: int) -> None:
    rng = random.Random(seed)
    users, impressions, stamps = [], [], []
    for user in range(rng.randint(1, 40)):
        clock = rng.randint(0, 86_400_000)
        for search in range(rng.randint(1, 30)):
            clock += rng.choice([500, 3000, 5000, 9000, 60_000, 600_000])
            for _ in range(rng.randint(1, 3)):  # rows of one search, sometimes logged later
                users.append(f"u{user:03d}")
                impressions.append(f"s{user}.{search % 25}")  # some impressions repeat
                stamps.append(clock + rng.choice([0, 0, 70_000]))
    order = list(range(len(users)))
    rng.shuffle(order)
    columns = ([users[i] for i in order], [impressions[i] for i in order], np.array([stamps[i] for i in order]))
    expected = find_bots(*columns)
    assert find_bots_columns(pa.array(columns[0]), pa.array(columns[1]), columns[2]) == expected
    assert find_bots_columns(pa.array(columns[0]), pa.array(columns[1]), columns[2], window_seconds=600, min_searches=4) == find_bots(
        *columns, window_seconds=600, min_searches=4)


def test_hex_digests_are_the_per_line_event_id_hashes() -> None:
    from pipeline.ingest.columns import hex_digests
    from pipeline.ingest.reference_path import hash_event_key

    keys = [b"", b"a\x1fb", "caf\u00e9".encode(), bytes(range(256))]
    assert hex_digests(keys).to_pylist() == [hash_event_key(k) for k in keys]
    assert hex_digests([]).to_pylist() == []
