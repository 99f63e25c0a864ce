"""Ingestion on hand-made landing partitions: counts, quarantine, dedupe, bots, re-runs, errors, CLI."""
from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import clicks_path, manifest_path
from pipeline.storage.schemas import CLICKS_SCHEMA, LANDING_FIELDS, QUARANTINE_SCHEMA
from pipeline.storage.store import Store

DAY = dt.date(2026, 1, 1)
LANDING = "landing/clicks/dt=2026-01-01"


def row(impression: str, rank: int, **changes: Any) -> dict[str, Any]:
    """A landing row of user u-<session> in session s-<session> (impression ``<session>.<k>``)."""
    session = impression.split(".")[0]
    base = {
        "ts": f"2026-01-01T10:{int(impression.split('.')[1]):02d}:00.000+00:00", "user_id": f"u-{session}",
        "session_id": f"s-{session}", "impression_id": impression, "query": "Cordless  DRILL 20v",
        "doc_id": f"d{rank}", "title": f"Drill Model {rank}X", "position": rank, "clicked": rank == 1,
    }
    return {**base, **changes}


def jsonl(rows: list[Any]) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode("utf-8")


def bot_rows() -> list[dict[str, Any]]:
    """12 searches 3 s apart, clicking everything."""
    return [
        row(f"bot.{k}", 1, user_id="crawler", ts=f"2026-01-01T03:00:{3 * k:02d}.000+00:00", clicked=True)
        for k in range(12)
    ]


def landing_lines() -> list[Any]:
    people = [row("a.1", 1), row("a.1", 2), row("a.2", 1), row("b.1", 1), row("b.1", 2)]
    truncated = json.dumps(row("b.1", 3))[:30]
    return [*people, people[1], truncated, row("c.1", 1, position="3rd"), row("c.1", 2, query="  "), *bot_rows()]


@pytest.fixture()
def seeded(store: Store) -> Store:
    store.write_bytes(f"{LANDING}/part-0.jsonl", jsonl(landing_lines()))
    return store


def test_counts_identity_quarantine_normalisation(settings: Settings, seeded: Store) -> None:
    result = ingest_dates(settings, [DAY])
    counts = {k: result[k] for k in ("rows_read", "accepted", "quarantined", "duplicates", "bot_rows")}
    assert counts == {"rows_read": 21, "accepted": 5, "quarantined": 3, "duplicates": 1, "bot_rows": 12}
    assert sum(list(counts.values())[1:]) == counts["rows_read"]

    clicks = seeded.read_table(clicks_path(DAY))
    assert clicks.schema == CLICKS_SCHEMA
    assert clicks.column("source_line").to_pylist() == [1, 2, 3, 4, 5]
    assert set(clicks.column("query_raw").to_pylist()) == {"Cordless  DRILL 20v"}
    assert set(clicks.column("query").to_pylist()) == {"cordless drill 20v"}
    assert clicks.column("title").to_pylist()[0] == "drill model 1x"
    assert len(set(clicks.column("event_id").to_pylist())) == 5
    assert "crawler" not in clicks.column("user_id").to_pylist()

    quarantine = seeded.read_table("quarantine/ingest/dt=2026-01-01")
    assert quarantine.schema == QUARANTINE_SCHEMA
    got = [(r["source_file"], r["source_line"], r["reason"].split(":")[0]) for r in quarantine.to_pylist()]
    assert got == [(f"{LANDING}/part-0.jsonl", 7, "invalid JSON"), (f"{LANDING}/part-0.jsonl", 8, "field position"),
                   (f"{LANDING}/part-0.jsonl", 9, "field query")]

    manifest = seeded.read_json(manifest_path(DAY))
    assert manifest["bot_users"] == [{"user_id": "crawler", "searches": 12, "max_searches_in_window": 12}]
    assert manifest["files"] == {f"{LANDING}/part-0.jsonl": 21}


def test_rerun_gives_same_bytes_and_replaces_the_partition(settings: Settings, seeded: Store) -> None:
    outputs = [clicks_path(DAY), "quarantine/ingest/dt=2026-01-01/part-0.parquet", manifest_path(DAY)]
    ingest_dates(settings, [DAY])
    first = [seeded.read_bytes(p) for p in outputs]
    ingest_dates(settings, [DAY])
    assert [seeded.read_bytes(p) for p in outputs] == first

    seeded.write_bytes(f"{LANDING}/part-0.jsonl", jsonl([row("z.1", 1)]))
    result = ingest_dates(settings, [DAY])
    assert (result["rows_read"], result["accepted"], result["quarantined"]) == (1, 1, 0)
    assert seeded.read_table(clicks_path(DAY)).column("impression_id").to_pylist() == ["z.1"]
    assert seeded.read_table("quarantine/ingest/dt=2026-01-01").num_rows == 0


def test_formats_mixed_in_one_partition_share_event_ids(settings: Settings, store: Store) -> None:
    rows = [row("a.1", 1), row("a.1", 2)]
    header = ",".join(LANDING_FIELDS)
    csv_lines = [",".join(str(r[k]).lower() if k == "clicked" else str(r[k]) for k in LANDING_FIELDS) for r in rows]
    sink = io.BytesIO()
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in LANDING_FIELDS}), sink)
    store.write_bytes(f"{LANDING}/a.jsonl", jsonl(rows))
    store.write_bytes(f"{LANDING}/b.csv", ("\n".join([header, *csv_lines]) + "\n").encode())
    store.write_bytes(f"{LANDING}/c.parquet", sink.getvalue())
    store.write_bytes(f"{LANDING}/_SUCCESS", b"")
    result = ingest_dates(settings, [DAY])
    assert (result["rows_read"], result["accepted"], result["duplicates"]) == (6, 2, 4)
    assert sorted(result["per_date"]["2026-01-01"]["files"]) == [f"{LANDING}/a.jsonl", f"{LANDING}/b.csv", f"{LANDING}/c.parquet"]


def test_missing_partition_fails_before_writing_anything(settings: Settings, seeded: Store) -> None:
    with pytest.raises(InputError, match=r"landing/clicks/dt=2026-01-02: missing landing partition"):
        ingest_dates(settings, [DAY, DAY + dt.timedelta(days=1)])
    assert not seeded.exists(clicks_path(DAY))


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("part-1.jsonl", b"", r"part-1\.jsonl: empty file"),
        ("part-1.jsonl", (json.dumps(row("x.1", 1, title="90°"), ensure_ascii=False) + "\n").encode("latin-1") * 3, r"part-1\.jsonl: wrong encoding"),
        ("part-1.csv", b"ts,user_id\n2026-01-01T00:00:00Z,u\n", r"part-1\.csv, row 1: missing column\(s\) session_id"),
        ("part-1.parquet", b"garbage", r"part-1\.parquet: unreadable Parquet"),
    ],
)
def test_bad_file_stops_with_one_clear_error(
    settings: Settings, seeded: Store, name: str, data: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seeded.write_bytes(f"{LANDING}/{name}", data)
    with pytest.raises(InputError, match=message):
        ingest_dates(settings, [DAY])
    assert main(["ingest", "--date", "2026-01-01", "--json", "--store", settings.store]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"].startswith(seeded.uri(f"{LANDING}/{name}"))
    assert "Traceback" not in err and err.count("deepsent: error:") == 1


@pytest.mark.parametrize("target", ["inside", "outside"])
def test_a_landing_symlink_is_refused_and_never_echoed(settings: Settings, seeded: Store, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str], target: str) -> None:
    secret = tmp_path / "secret.txt" if target == "outside" else seeded.local_path("features/notes.txt")
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("first line of a file nobody named\n")
    seeded.local_path(f"{LANDING}/part-9.jsonl").symlink_to(secret)
    assert main(["ingest", "--date", "2026-01-01", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "part-9.jsonl: " in err and "nobody named" not in err
    assert not seeded.exists(clicks_path(DAY)) and not seeded.exists("quarantine")


def test_one_megabyte_line_and_non_utf8_line_are_quarantined(settings: Settings, store: Store) -> None:
    lines = [json.dumps(row(f"a.{k}", 1)).encode() for k in range(1, 6)]
    lines.insert(2, json.dumps(row("a.9", 1, title="y" * (1 << 20))).encode())
    lines.insert(4, json.dumps(row("a.8", 1, title="Drill 90°"), ensure_ascii=False).encode("latin-1"))
    store.write_bytes(f"{LANDING}/part-0.jsonl", b"\n".join(lines) + b"\n")
    result = ingest_dates(settings, [DAY])
    assert (result["rows_read"], result["accepted"], result["quarantined"]) == (7, 5, 2)
    reasons = store.read_table("quarantine/ingest/dt=2026-01-01").to_pylist()
    assert [(r["source_line"], r["reason"]) for r in reasons] == [
        (3, f"line of {len(lines[2])} bytes is over the limit of 65536 bytes"), (5, "line is not valid UTF-8")
    ]
    assert all(len(r["raw"].encode()) <= 4096 for r in reasons)


def test_cli_range_prints_one_json_object(settings: Settings, seeded: Store, capsys: pytest.CaptureFixture[str]) -> None:
    seeded.write_bytes("landing/clicks/dt=2026-01-02/part-0.jsonl", jsonl([row("q.1", 1)]))
    rc = main(["ingest", "--start", "2026-01-01", "--end", "2026-01-02", "--json", "--store", settings.store])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("\n") == 1
    result = json.loads(out)
    assert result["dates"] == ["2026-01-01", "2026-01-02"] and result["rows_read"] == 22
    assert main(["ingest", "--date", "2026-01-02", "--store", settings.store]) == 0
    assert "rows read 1 = accepted 1 + quarantined 0 + duplicates 0 + bot rows 0" in capsys.readouterr().out


def landing_file(fmt: str, rows: list[dict[str, Any]]) -> bytes:
    """``rows`` as a landing file of format ``fmt`` (CSV values as text, Parquet types inferred)."""
    if fmt == "jsonl":
        return jsonl(rows)
    if fmt == "parquet":
        sink = io.BytesIO()
        pq.write_table(pa.table({k: [r[k] for r in rows] for k in LANDING_FIELDS}), sink)
        return sink.getvalue()
    lines = [",".join(LANDING_FIELDS), *(",".join(str(r[k]) for k in LANDING_FIELDS) for r in rows)]
    return ("\n".join(lines) + "\n").encode()


def ingest_one_file(settings: Settings, store: Store, fmt: str, rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Ingest ``rows`` as one landing file; the counts must add up. Returns (line, reason) of the quarantine."""
    name = f"{LANDING}/part-0.{fmt}"
    store.write_bytes(name, landing_file(fmt, rows))
    result = ingest_dates(settings, [DAY])
    assert result["rows_read"] == len(rows) == sum(result[k] for k in ("accepted", "quarantined", "duplicates", "bot_rows"))
    quarantine = store.read_table("quarantine/ingest/dt=2026-01-01").to_pylist()
    assert {r["source_file"] for r in quarantine} <= {name}
    return [(r["source_line"], r["reason"]) for r in quarantine]


@pytest.mark.parametrize(("fmt", "line"), [("jsonl", 2), ("csv", 3), ("parquet", 2)])
def test_position_over_int32_costs_one_row_not_the_day(settings: Settings, store: Store, fmt: str, line: int) -> None:
    rows = [row("a.1", 1), row("a.1", 2, position=2**31), row("a.1", 3)]
    assert ingest_one_file(settings, store, fmt, rows) == [(line, "field position: 2147483648 is over the int32 limit of 2147483647")]
    assert store.read_table(clicks_path(DAY)).column("position").to_pylist() == [1, 3]


@pytest.mark.parametrize(("fmt", "line"), [("jsonl", 2), ("csv", 3)])
def test_unicode_digit_position_is_quarantined(settings: Settings, store: Store, fmt: str, line: int) -> None:
    rows = [row("a.1", 1), row("a.1", 2, position="²"), row("a.1", 3, position="3")]
    assert ingest_one_file(settings, store, fmt, rows) == [(line, "field position: expected an integer, got str '²'")]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_timestamps_outside_the_landing_day_and_tolerance_are_quarantined(settings: Settings, store: Store, fmt: str) -> None:
    stamps = {
        "0001-01-01T00:00:00+14:00": False, "9999-12-31T23:59:59-12:00": False,
        "2025-12-30T23:59:59.999+00:00": False, "2025-12-31T00:00:00.000+00:00": True,  # the day before: tolerated
        "2026-01-02T23:59:59.999+00:00": True, "2026-01-03T00:59:00+01:00": True,  # 23:59 UTC of the day after
        "2026-01-03T00:00:00+00:00": False, "2026-01-02T23:00:00-01:00": False,
    }
    rows = [row(f"a.{k}", 1, ts=ts) for k, ts in enumerate(stamps, start=1)]
    quarantined = ingest_one_file(settings, store, fmt, rows)
    first = 2 if fmt == "csv" else 1
    assert quarantined == [
        (first + k, f"field ts: {ts!r} is outside the landing date 2026-01-01 ± 1 day (UTC)")
        for k, (ts, ok) in enumerate(stamps.items()) if not ok
    ]
