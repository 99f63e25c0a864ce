"""Property-style test: random malformed values of every field, in every text format, cost rows, never the day.

A seeded ``random.Random`` mixes valid rows with rows whose fields hold odd values (Unicode digits,
huge, negative and float numbers, NaN/inf, bools, null, lists, objects, blank and very long text,
odd timestamps), plus broken lines; Parquet files get odd column types too. The real ingest must
raise nothing, keep ``rows_read = accepted + quarantined + duplicates + bot_rows``, give every
quarantine row its file, line and reason, accept every untouched row, and accept only rows that
fit CLICKS_SCHEMA within the landing-day window.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.config import Settings
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import clicks_path
from pipeline.storage.schemas import CLICKS_SCHEMA, LANDING_FIELDS
from pipeline.storage.store import Store

DAY = dt.date(2026, 1, 1)
LANDING = "landing/clicks/dt=2026-01-01"
FIELDS = list(LANDING_FIELDS)
ROWS_PER_FILE = 120
MAX_POSITION = 2 ** (CLICKS_SCHEMA.field("position").type.bit_width - 1) - 1
WINDOW_MS = tuple(  # the day before DAY to the day after it, UTC midnights
    int(dt.datetime.combine(DAY + dt.timedelta(days=d), dt.time(), dt.timezone.utc).timestamp()) * 1000 for d in (-1, 2)
)
ODD_TEXT = ["²", "٣", "１２", "Ⅻ", "3rd", "#3", "-1", "+4", "0x10", "1e3", " 7 ", "", " ", "\t\n", "\u3000", "null", "true"]
ODD_NUMBERS = [0, -1, 2**31, 2**31 - 1, 2**63, -(2**63), 10**30, 10**300, 0.5, 1.0, -0.0, 1e308, float("nan"), float("inf")]
ODD_TIMESTAMPS = [
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "2026-01-01T10:00:00", "2026-01-01", "2026-13-01T00:00:00Z",
    "2026-01-01T24:00:00Z", "2026-01-01T10:00:00+25:00", "2025-12-31T00:00:00Z", "2026-01-03T00:00:00Z", "yesterday",
    "1767261600", "2026-01-01T10:00:00.123456789+00:00", "２０２６-01-01T00:00:00Z", "2025-12-30T23:59:59.999-00:01",
]


def valid_row(k: int) -> dict[str, Any]:
    """A valid landing row of its own user, session and search (no duplicates, no bots)."""
    return {
        "ts": f"2026-01-01T{k % 24:02d}:{k % 60:02d}:{k % 59:02d}.{k % 1000:03d}+00:00", "user_id": f"u{k}",
        "session_id": f"s{k}", "impression_id": f"s{k}.1", "query": f"cordless drill {k % 7}", "doc_id": f"d{k}",
        "title": f"Drill Model {k}X", "position": 1 + k % 10, "clicked": k % 3 == 0,
    }


def odd_value(rng: random.Random) -> Any:
    """One random value that a landing field should not hold (or, by chance, one that it may)."""
    makers: list[Callable[[], Any]] = [
        lambda: rng.choice(ODD_TEXT),
        lambda: rng.choice(ODD_NUMBERS),
        lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.choice([True, False, None]),
        lambda: [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
        lambda: {"k": rng.choice(["v", 1, None, [2]])},
        lambda: rng.choice("xé字😀") * rng.choice([100, 17_000, 70_000]),
        lambda: "".join(chr(rng.choice([rng.randint(1, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])) for _ in range(rng.randint(1, 12))),
        lambda: rng.choice(ODD_TIMESTAMPS),
        lambda: f"{rng.randint(1, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00{rng.choice(['Z', '+14:00', '-12:00'])}",
    ]
    return rng.choice(makers)()


def random_rows(rng: random.Random, first: int) -> tuple[list[dict[str, Any]], int]:
    """ROWS_PER_FILE rows, about half with 1-3 fields replaced by odd values; also how many are untouched."""
    rows, clean = [], 0
    for k in range(first, first + ROWS_PER_FILE):
        row = valid_row(k)
        if rng.random() < 0.5:
            clean += 1
        else:
            for name in rng.sample(FIELDS, rng.randint(1, 3)):
                row[name] = odd_value(rng)
        rows.append(row)
    return rows, clean


def jsonl_file(rng: random.Random, rows: list[dict[str, Any]]) -> tuple[bytes, int]:
    lines = [json.dumps(r) for r in rows]
    broken = ["", "[1, 2]", '{"ts": ', "{" * 3000, '{"position": ' + "9" * 5000 + "}", "[" * 3000 + "]" * 3000, "nul\x00l"]
    for _ in range(rng.randint(1, 5)):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(broken))
    return ("\n".join(lines) + "\n").encode("utf-8"), len(lines)


def delimited_file(rng: random.Random, rows: list[dict[str, Any]], sep: str) -> tuple[bytes, int]:
    cells = [["" if r[k] is None else str(r[k]) for k in FIELDS] for r in rows]
    for _ in range(rng.randint(1, 5)):  # rows with too few or too many fields
        cells.insert(rng.randrange(len(cells) + 1), [str(odd_value(rng)) for _ in range(rng.choice([1, 5, 8, 10, 12]))])
    out = io.StringIO()
    writer = csv.writer(out, delimiter=sep, lineterminator="\n")
    writer.writerows([FIELDS, *cells])
    return out.getvalue().encode("utf-8"), len(cells)


ODD_TYPES: dict[pa.DataType, Callable[[random.Random], Any]] = {
    pa.int64(): lambda r: r.choice([r.randint(-(2**63), 2**63 - 1), 2**31, 0, -1, 5]),
    pa.uint64(): lambda r: r.randint(0, 2**64 - 1),
    pa.float64(): lambda r: r.choice([float("nan"), float("inf"), 1.0, 2.5, -0.0, 1e308]),
    pa.bool_(): lambda r: r.random() < 0.5,
    pa.string(): lambda r: str(odd_value(r)),
    pa.binary(): lambda r: bytes(r.randrange(256) for _ in range(r.randint(0, 8))),
    pa.timestamp("ms", tz="UTC"): lambda r: r.choice([r.randint(-(2**63), 2**63 - 1), r.randint(*WINDOW_MS)]),
    pa.timestamp("ns", tz="Pacific/Kiritimati"): lambda r: r.randint(-(2**63), 2**63 - 1),
    pa.timestamp("us"): lambda r: r.randint(-(2**63), 2**63 - 1),
    pa.date32(): lambda r: r.randint(-(2**31), 2**31 - 1),
    pa.duration("s"): lambda r: r.randint(-(2**63), 2**63 - 1),
    pa.null(): lambda r: None,
    pa.list_(pa.int64()): lambda r: [r.randint(0, 9)],
    pa.struct([("a", pa.int64())]): lambda r: {"a": r.randint(0, 9)},
}
NATURAL = {name: pa.int64() if name == "position" else pa.bool_() if name == "clicked" else pa.string() for name in FIELDS}
FITS: dict[pa.DataType, Callable[[Any], bool]] = {
    pa.string(): lambda v: isinstance(v, str),
    pa.int64(): lambda v: type(v) is int and -(2**63) <= v < 2**63,
    pa.bool_(): lambda v: type(v) is bool,
}


def parquet_file(rng: random.Random, rows: list[dict[str, Any]]) -> tuple[bytes, int]:
    """Each column in its natural type (values that do not fit become random ones) or, at random, an odd type."""
    columns = {}
    for name in FIELDS:
        kind = NATURAL[name] if rng.random() < 0.6 else rng.choice(list(ODD_TYPES))
        fits = FITS.get(kind, lambda v: False)
        values = [r[name] if fits(r[name]) else None if rng.random() < 0.05 else ODD_TYPES[kind](rng) for r in rows]
        columns[name] = pa.array(values, type=kind)
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue(), len(rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_malformed_values_in_every_format_cost_rows_not_the_day(settings: Settings, store: Store, seed: int) -> None:
    rng = random.Random(seed)
    expected_rows, clean, first = {}, 0, 0
    for name, encode in [
        ("a.jsonl", jsonl_file), ("b.csv", lambda r, rows: delimited_file(r, rows, ",")),
        ("c.tsv", lambda r, rows: delimited_file(r, rows, "\t")), ("d.parquet", parquet_file), ("e.parquet", parquet_file),
    ]:
        rows, untouched = random_rows(rng, first)
        first += len(rows)
        data, expected_rows[f"{LANDING}/{name}"] = encode(rng, rows)
        clean += untouched if not name.endswith(".parquet") else 0
        store.write_bytes(f"{LANDING}/{name}", data)

    result = ingest_dates(settings, [DAY])

    counts = result["per_date"][DAY.isoformat()]
    assert counts["files"] == expected_rows
    assert counts["rows_read"] == sum(expected_rows.values())
    assert counts["rows_read"] == counts["accepted"] + counts["quarantined"] + counts["duplicates"] + counts["bot_rows"]
    assert counts["accepted"] >= clean and counts["quarantined"] > 0
    quarantine = store.read_table("quarantine/ingest/dt=2026-01-01").to_pylist()
    assert len(quarantine) == counts["quarantined"]
    for row in quarantine:
        assert row["source_file"] in expected_rows and row["source_line"] >= 1 and row["reason"].strip(), row
    clicks = store.read_table(clicks_path(DAY))
    assert all(1 <= p <= MAX_POSITION for p in clicks.column("position").to_pylist())
    stamps = clicks.column("ts").cast(pa.int64()).to_pylist()
    assert all(WINDOW_MS[0] <= ms < WINDOW_MS[1] for ms in stamps)
