"""Catalogue ingestion: snapshot then deltas, carried days, every bad-row reason, re-runs, the mass-retire guard,
every format, a catalogue-only day through the CLI, and the simulator's feed (on by default) and its knobs."""
from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.ingest.catalog.apply import MAX_RETIRE_SHARE
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import catalog_changes_path, catalog_manifest_path, catalog_path, clicks_path
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.schemas import CATALOG_CHANGES_SCHEMA, CATALOG_SCHEMA, QUARANTINE_SCHEMA
from pipeline.storage.store import Store

D1, D2, D3 = dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)
COUNTS = ("rows_in", "kept", "quarantined", "launches", "edits", "retirements", "unchanged", "products")


def landing(day: dt.date, name: str) -> str:
    return f"landing/catalog/dt={day.isoformat()}/{name}"


def jsonl(rows: list[Any]) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode("utf-8")


def csv_bytes(header: list[str], rows: list[list[str]], sep: str = ",") -> bytes:
    return "\n".join(sep.join(r) for r in [header, *rows]).encode("utf-8") + b"\n"


def parquet_bytes(columns: dict[str, list[Any]]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def click_file(store: Store, day: dt.date) -> None:
    """One valid click row for ``day`` (a day with clicks but no catalogue file)."""
    row = {"ts": f"{day.isoformat()}T10:00:00+00:00", "user_id": "u", "session_id": "s", "impression_id": "i",
           "query": "drill", "doc_id": "p1", "title": "Drill", "position": 1, "clicked": True}
    store.write_bytes(f"landing/clicks/dt={day.isoformat()}/part-0.jsonl", jsonl([row]))


def counts(manifest: dict[str, Any]) -> dict[str, int]:
    return {k: manifest[k] for k in COUNTS}


def catalogue(store: Store, day: dt.date) -> dict[str, tuple[Any, ...]]:
    table = store.read_table(catalog_path(day))
    assert table.schema == CATALOG_SCHEMA
    assert table.column("product_id").to_pylist() == sorted(table.column("product_id").to_pylist())
    return {r["product_id"]: (r["title_raw"], r["title"], json.loads(r["attributes"]), r["since"], r["updated"])
            for r in table.to_pylist()}


def changes(store: Store, day: dt.date) -> list[tuple[Any, ...]]:
    table = store.read_table(catalog_changes_path(day))
    assert table.schema == CATALOG_CHANGES_SCHEMA
    return [tuple(r.values()) for r in table.to_pylist()]


def quarantine(store: Store, day: dt.date) -> list[tuple[str, int, str]]:
    table = store.read_table(f"quarantine/catalog/dt={day.isoformat()}")
    assert table.schema == QUARANTINE_SCHEMA
    return [(r["source_file"].rsplit("/", 1)[1], r["source_line"], r["reason"]) for r in table.to_pylist()]


@pytest.fixture()
def three_days(store: Store) -> Store:
    """A snapshot (CSV, with a brand attribute), a delta (JSONL: launch, edit, retire), a day with clicks only."""
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(
        ["product_id", "title", "brand"],
        [["p1", "Cordless  DRILL", "Acme"], ["p2", "Saw", ""], ["p3", "Hammer", "Bosch"]]))
    store.write_bytes(landing(D2, "delta.jsonl"), jsonl([
        {"product_id": "p4", "title": "Nail Gun", "op": "upsert", "colour": "red"},
        {"product_id": "p1", "title": "Cordless Drill 20V", "brand": "Acme"},
        {"product_id": "p2", "op": "retire"},
        {"product_id": "p3", "title": "Hammer", "brand": "Bosch"},  # the same as before: unchanged
    ]))
    click_file(store, D3)
    return store


def test_snapshot_then_deltas_with_a_day_carried_forward(settings: Settings, three_days: Store) -> None:
    result = ingest_dates(settings, [D1, D2, D3])
    days = result["catalog"]
    assert counts(days["2026-01-01"]) == {"rows_in": 3, "kept": 3, "quarantined": 0, "launches": 3, "edits": 0,
                                          "retirements": 0, "unchanged": 0, "products": 3}
    assert counts(days["2026-01-02"]) == {"rows_in": 4, "kept": 4, "quarantined": 0, "launches": 1, "edits": 1,
                                          "retirements": 1, "unchanged": 1, "products": 3}
    assert counts(days["2026-01-03"]) == {"rows_in": 0, "kept": 0, "quarantined": 0, "launches": 0, "edits": 0,
                                          "retirements": 0, "unchanged": 3, "products": 3}
    assert [days[d]["kind"] for d in days] == ["snapshot", "delta", "carried"]
    assert (days["2026-01-03"]["carried_from"], days["2026-01-03"]["source_date"]) == ("2026-01-02", "2026-01-02")
    assert days["2026-01-02"]["base_date"] == "2026-01-01" and days["2026-01-02"]["carried_from"] is None

    assert catalogue(three_days, D1) == {
        "p1": ("Cordless  DRILL", "cordless drill", {"brand": "Acme"}, D1, D1),  # normalised as click titles
        "p2": ("Saw", "saw", {}, D1, D1),  # an empty attribute is no attribute
        "p3": ("Hammer", "hammer", {"brand": "Bosch"}, D1, D1),
    }
    assert catalogue(three_days, D2) == {
        "p1": ("Cordless Drill 20V", "cordless drill 20v", {"brand": "Acme"}, D1, D2),
        "p3": ("Hammer", "hammer", {"brand": "Bosch"}, D1, D1),
        "p4": ("Nail Gun", "nail gun", {"colour": "red"}, D2, D2),
    }
    assert changes(three_days, D2) == [("p1", "edit", "cordless drill", "cordless drill 20v"),
                                       ("p2", "retire", "saw", None), ("p4", "launch", None, "nail gun")]
    assert catalogue(three_days, D3) == catalogue(three_days, D2) and changes(three_days, D3) == []
    assert three_days.read_bytes(catalog_path(D3)) == three_days.read_bytes(catalog_path(D2))
    assert result["per_date"].keys() == {"2026-01-03"}  # clicks only where click files landed


def test_a_store_without_catalogue_files_gets_no_catalogue(settings: Settings, store: Store) -> None:
    click_file(store, D1)
    assert ingest_dates(settings, [D1])["catalog"] == {}
    assert not store.exists("catalog") and not store.exists("quarantine/catalog")


def test_rerun_gives_identical_bytes(settings: Settings, three_days: Store) -> None:
    ingest_dates(settings, [D1, D2, D3])
    outputs = [p for p in three_days.list_files("") if p.startswith(("catalog/", "quarantine/catalog/"))]
    assert len(outputs) == 12
    first = {p: three_days.read_bytes(p) for p in outputs}
    ingest_dates(settings, [D1, D2, D3])
    ingest_dates(settings, [D2])  # one day again, on the same base
    assert {p: three_days.read_bytes(p) for p in outputs} == first


def test_every_bad_row_is_quarantined_with_its_reason(settings: Settings, store: Store) -> None:
    store.write_bytes(landing(D1, "snapshot.jsonl"), jsonl([
        {"product_id": "p1", "title": "Drill"},
        {"product_id": "p2", "title": ""},  # 2: empty title
        {"product_id": "p3", "title": "x" * 1025},  # 3: over-long title
        {"product_id": "p1", "title": "Drill again"},  # 4: duplicate id in the file
        {"product_id": "p5", "op": "retire"},  # 5: a retire in a snapshot
        {"title": "no id"},  # 6
        '{"product_id": "p7", "title": ',  # 7: a broken line
        {"product_id": "p8", "title": "Saw", "op": "delete"},  # 8: an unknown op
        {"product_id": "p9"},  # 9: an upsert without a title
        {"product_id": "p10", "title": "Level"},
    ]) + b'{"product_id": "p11", "title": "Drill 90\xb0"}\n'  # 11: not UTF-8 (one bad line is tolerated)
       b'{"product_id": "p12", "title": "Drill", "colour": "\\ud800"}\n')  # 12: a lone surrogate in an attribute
    store.write_bytes(landing(D2, "delta.csv"), csv_bytes(
        ["product_id", "title", "op"], [["p1", "", "retire"], ["p99", "", "retire"], ["p10", "Level", "RETIRE "]]))
    click_file(store, D2)
    result = ingest_dates(settings, [D1, D2])["catalog"]
    assert counts(result["2026-01-01"]) == {"rows_in": 12, "kept": 2, "quarantined": 10, "launches": 2, "edits": 0,
                                            "retirements": 0, "unchanged": 0, "products": 2}
    assert quarantine(store, D1) == [
        ("snapshot.jsonl", 2, "field title: empty"),
        ("snapshot.jsonl", 3, "field title: 1025 characters, over the limit of 1024"),
        ("snapshot.jsonl", 4, "duplicate product_id: 'p1' first at line 1"),
        ("snapshot.jsonl", 5, "field op: 'retire' in a snapshot, which lists the live products (leave a retired one out)"),
        ("snapshot.jsonl", 6, "field product_id: missing or null"),
        ("snapshot.jsonl", 7, "invalid JSON: Expecting value (column 31)"),
        ("snapshot.jsonl", 8, "field op: expected upsert or retire, got 'delete'"),
        ("snapshot.jsonl", 9, "field title: missing or null"),
        ("snapshot.jsonl", 11, "line is not valid UTF-8"),
        ("snapshot.jsonl", 12, "attributes: not valid Unicode (a lone surrogate escape)"),
    ]
    assert result["2026-01-01"]["quarantine_reasons"] == {
        "attributes": 1, "duplicate product_id": 1, "field op": 2, "field product_id": 1, "field title": 3, "invalid JSON": 1,
        "line is not valid UTF-8": 1}
    assert counts(result["2026-01-02"]) == {"rows_in": 3, "kept": 2, "quarantined": 1, "launches": 0, "edits": 0,
                                            "retirements": 2, "unchanged": 0, "products": 0}
    assert quarantine(store, D2) == [("delta.csv", 3, "retire of an unknown product_id: 'p99' is not in the catalogue")]


def test_a_wrongly_encoded_file_stops_with_one_line(settings: Settings, store: Store,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    latin1 = "product_id,title\n" + "".join(f"p{k},Drill 90°\n" for k in range(5))
    store.write_bytes(landing(D1, "snapshot.csv"), latin1.encode("latin-1"))
    assert main(["ingest", "--date", "2026-01-01", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "snapshot.csv: wrong encoding: 5 of 5 lines are not valid UTF-8" in err
    assert "Traceback" not in err and not store.exists("catalog")


@pytest.mark.parametrize(("files", "message"), [
    ({"snapshot.csv": b"product_id,name\np1,Drill\n"}, r"snapshot\.csv, row 1: missing column\(s\) title"),
    ({"snapshot.xml": b"<products/>"}, r"snapshot\.xml: unsupported file type '\.xml'"),
    ({"snapshot.jsonl": b""}, r"snapshot\.jsonl: empty file"),
    ({"snapshot.csv": b"product_id,title\np1,Drill\n", "delta.csv": b"product_id,title\np2,Saw\n"},
     r"dt=2026-01-01: snapshot \(snapshot\*\) and delta files on one day"),
])
def test_a_bad_file_is_one_line_naming_it(settings: Settings, store: Store, capsys: pytest.CaptureFixture[str],
                                          files: dict[str, bytes], message: str) -> None:
    for name, data in files.items():
        store.write_bytes(landing(D1, name), data)
    with pytest.raises(InputError, match=message):
        ingest_dates(settings, [D1])
    assert main(["ingest", "--date", "2026-01-01", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"deepsent: error: {store.uri('landing/catalog/dt=2026-01-01')}")
    assert not store.exists("catalog")


def test_mass_retire_is_refused_then_allowed_with_the_flag(settings: Settings, store: Store,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    products = [[f"p{k}", f"Drill {k}"] for k in range(10)]
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(["product_id", "title"], products))
    ingest_dates(settings, [D1])
    kept = 4  # six of ten retired: over the limit
    assert 10 - kept > MAX_RETIRE_SHARE * 10
    store.write_bytes(landing(D2, "snapshot.csv"), csv_bytes(["product_id", "title"], products[:kept]))
    with pytest.raises(InputError, match=r"snapshot\.csv: this snapshot would retire 6 of the 10 live products \(60%, "
                                         r"over the limit of 50%\).*--allow-mass-retire"):
        ingest_dates(settings, [D2])
    assert main(["ingest", "--date", "2026-01-02", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and store.uri(landing(D2, "snapshot.csv")) in err and "Traceback" not in err
    assert not store.exists(catalog_manifest_path(D2)) and not store.exists(catalog_path(D2))

    assert main(["ingest", "--date", "2026-01-02", "--allow-mass-retire", "--store", settings.store]) == 0
    out = capsys.readouterr().out
    assert "catalogue 2026-01-02 (snapshot): rows in 4 = kept 4 + quarantined 0 (none); launches 0, edits 0, " \
           "retirements 6, unchanged 4; 4 products" in out
    assert store.read_json(catalog_manifest_path(D2))["mass_retire_allowed"] is True
    # a delta may retire as many as it names: the guard is for snapshots, whose silence retires
    store.write_bytes(landing(D3, "delta.csv"), csv_bytes(["product_id", "title", "op"],
                                                         [[f"p{k}", "", "retire"] for k in range(3)]))
    assert ingest_dates(settings, [D3])["catalog"]["2026-01-03"]["products"] == 1


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_every_format_gives_the_same_catalogue(settings: Settings, store: Store, fmt: str) -> None:
    rows = [{"product_id": "p2", "title": "Saw  Blade", "brand": "Acme"},
            {"product_id": "p1", "title": "Drill", "brand": "Bosch"}]
    header = ["product_id", "title", "brand"]
    data = {
        "csv": csv_bytes(header, [[r[k] for k in header] for r in rows]),
        "tsv": csv_bytes(header, [[r[k] for k in header] for r in rows], "\t"),
        "jsonl": jsonl(rows),
        "parquet": parquet_bytes({k: [r[k] for r in rows] for k in header}),
    }[fmt]
    store.write_bytes(landing(D1, f"snapshot.{fmt}"), data)
    manifest = ingest_dates(settings, [D1])["catalog"]["2026-01-01"]
    assert manifest["files"] == {landing(D1, f"snapshot.{fmt}"): 2} and manifest["products"] == 2
    assert catalogue(store, D1) == {"p1": ("Drill", "drill", {"brand": "Bosch"}, D1, D1),
                                    "p2": ("Saw  Blade", "saw blade", {"brand": "Acme"}, D1, D1)}


def test_a_catalogue_only_day_through_the_cli(settings: Settings, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    store.write_bytes(landing(D1, "snapshot.parquet"), parquet_bytes({"product_id": ["p1"], "title": ["Drill"]}))
    store.write_bytes(landing(D1, "_SUCCESS"), b"")
    rc = main(["ingest", "--date", "2026-01-01", "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "2026-01-01: no click files (the catalogue only)" in out
    assert "catalogue 2026-01-01 (snapshot): rows in 1 = kept 1 + quarantined 0 (none); launches 1" in out
    assert store.exists(catalog_path(D1)) and not store.exists(clicks_path(D1))
    # neither clicks nor a catalogue file: still the missing landing partition (a carried catalogue needs its clicks)
    assert main(["ingest", "--date", "2026-01-02", "--store", settings.store]) == 2
    assert "landing/clicks/dt=2026-01-02: missing landing partition" in capsys.readouterr().err


def test_a_damaged_base_catalogue_is_one_line(settings: Settings, three_days: Store,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    ingest_dates(settings, [D1])
    three_days.write_bytes(catalog_path(D1), parquet_bytes({"product_id": ["p1"]}))
    assert main(["ingest", "--date", "2026-01-02", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "catalog/dt=2026-01-01/part-0.parquet: " in err
    assert "rebuild it with `deepsent ingest --date 2026-01-01`" in err


CHURN = SimParams(searches_per_day=100, users=100, bots_per_day=0, malformed_per_day=0, catalog_feed=1,
                  catalog_launch_share=0.1, catalog_retire_share=0.05, catalog_edit_share=0.1)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_simulator_writes_a_catalogue_when_its_knobs_are_on(settings: Settings, store: Store, fmt: str) -> None:
    start, days = dt.date(2026, 3, 1), 3
    sim = simulate(settings, start, days, seed=11, params=CHURN, fmt=fmt)
    files = [p for p in store.list_files("landing/catalog")]
    assert files == [f"landing/catalog/dt=2026-03-0{k}/{'snapshot' if k == 1 else 'delta'}.{fmt}" for k in (1, 2, 3)]
    first = {p: store.read_bytes(p) for p in files}
    simulate(settings, start, days, seed=11, params=CHURN, fmt=fmt)
    assert {p: store.read_bytes(p) for p in files} == first  # same seed, same bytes

    got = ingest_dates(settings, [start + dt.timedelta(days=k) for k in range(days)])["catalog"]
    plan = sim["catalog_counts"]
    assert sum(m["quarantined"] for m in got.values()) == 0
    assert got["2026-03-01"]["products"] == plan["snapshot_products"]
    later = list(got.values())[1:]
    assert {k: sum(m[k] for m in later) for k in ("launches", "edits", "retirements")} == {
        k: plan[k] for k in ("launches", "edits", "retirements")}
    assert all(plan[k] > 0 for k in ("launches", "edits", "retirements"))
    edited = [c for c in changes(store, dt.date(2026, 3, 2)) if c[1] == "edit"]
    assert edited and all(new.startswith(old + " ") for _, _, old, new in edited)  # a word appended


def test_the_feed_is_on_by_default_and_off_writes_no_catalogue(settings: Settings, store: Store) -> None:
    defaults = SimParams()
    assert (defaults.catalog_feed, defaults.catalog_launch_share, defaults.catalog_retire_share,
            defaults.catalog_edit_share) == (1, 0.02, 0.01, 0.01)
    result = simulate(settings, dt.date(2026, 3, 1), 1,
                      params=SimParams(searches_per_day=50, users=50, bots_per_day=0, catalog_feed=0))
    assert "catalog_files" not in result and not store.exists("landing/catalog")
    with pytest.raises(Exception, match="catalog_retire_share"):
        SimParams().with_overrides({"catalog_retire_share": "1.5"})
