"""The click simulator: determinism, train-only input, log structure, click model, formats."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.ingest.ingest import ingest_dates
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store
from pipeline.text.homedepot import iter_judgments

START = dt.date(2026, 3, 1)
SMALL = SimParams(searches_per_day=150, users=200, bots_per_day=1, bot_searches_min=15, bot_searches_max=20)


def landing_bytes(store: Store) -> dict[str, bytes]:
    return {path: store.read_bytes(path) for path in store.list_files("landing")}


def test_same_seed_same_bytes_other_seed_differs(settings: Settings, tmp_path: Path) -> None:
    other = settings.with_overrides(store=str(tmp_path / "other"))
    simulate(settings, START, 2, seed=11, params=SMALL)
    simulate(other, START, 2, seed=11, params=SMALL)
    first = landing_bytes(Store.from_settings(settings))
    assert sorted(first) == ["landing/catalog/dt=2026-03-01/snapshot.jsonl", "landing/catalog/dt=2026-03-02/delta.jsonl",
                             "landing/clicks/dt=2026-03-01/part-0.jsonl", "landing/clicks/dt=2026-03-02/part-0.jsonl"]
    assert first == landing_bytes(Store.from_settings(other))  # clicks and catalogue
    simulate(other, START, 2, seed=12, params=SMALL)
    assert landing_bytes(Store.from_settings(other)) != first
    # a day's draws do not depend on the start (the catalogue's churn is drawn over the period: without it, the same day)
    no_feed = dataclasses.replace(SMALL, catalog_feed=0)
    simulate(settings, START, 2, seed=11, params=no_feed)
    simulate(other, START + dt.timedelta(days=1), 1, seed=11, params=no_feed)
    day2 = "landing/clicks/dt=2026-03-02/part-0.jsonl"
    assert Store.from_settings(other).read_bytes(day2) == Store.from_settings(settings).read_bytes(day2)


def test_reads_only_the_training_judgments(settings: Settings, tmp_path: Path) -> None:
    only_train = tmp_path / "data"
    (only_train / "homedepot").mkdir(parents=True)
    (only_train / "homedepot" / "judgments_train.csv").symlink_to(settings.train_judgments)
    result = simulate(settings.with_overrides(data_dir=only_train), START, 1, params=SMALL)
    assert result["stats"]["trec2013"] is None  # no reference log there; the simulation still runs
    train_queries = {j.query_raw for j in iter_judgments(settings.train_judgments)}
    rows = [json.loads(line) for line in Store.from_settings(settings).read_text(
        "landing/clicks/dt=2026-03-01/part-0.jsonl").splitlines() if line.endswith("}")]
    assert rows and {r["query"] for r in rows if "query" in r} <= train_queries


def test_log_structure_ranked_lists_and_timestamps(settings: Settings) -> None:
    params = SimParams(searches_per_day=400, users=300, malformed_per_day=0, duplicate_rate=0.0)
    simulate(settings, START, 1, params=params)
    store = Store.from_settings(settings)
    text = store.read_text("landing/clicks/dt=2026-03-01/part-0.jsonl")
    rows = [json.loads(line) for line in text.splitlines()]
    live = {json.loads(line)["product_id"] for line in store.read_text(
        "landing/catalog/dt=2026-03-01/snapshot.jsonl").splitlines()}  # the products launched later are not shown
    judged = defaultdict(set)
    for j in iter_judgments(settings.train_judgments):
        if j.doc_id in live:
            judged[j.query_raw].add(j.doc_id)
    by_impression = defaultdict(list)
    for r in rows:
        by_impression[r["impression_id"]].append(r)
        assert r["ts"].startswith("2026-03-01T") and r["ts"].endswith("+00:00")
        assert r["doc_id"] in judged[r["query"]]
    for shown in by_impression.values():
        assert [r["position"] for r in shown] == list(range(1, len(shown) + 1))
        assert len(shown) == min(params.max_results, len(judged[shown[0]["query"]]))
        assert len({(r["ts"], r["user_id"], r["session_id"], r["query"]) for r in shown}) == 1
    stamps = [r["ts"] for r in rows]
    assert stamps == sorted(stamps)  # logged in time order


def test_click_model_position_bias_and_grades(settings: Settings) -> None:
    result = simulate(settings, START, 1, params=SimParams(searches_per_day=2000, bots_per_day=0))
    stats = result["stats"]["simulated"]
    ctr = stats["ctr_by_position"]
    assert ctr["1"] > ctr["2"] > ctr["3"] > ctr["5"]
    grade = list(stats["ctr_by_grade"].values())
    assert grade == sorted(grade) and grade[0] > 0.0 and grade[-1] < 1.0  # noise both ways
    assert 0.0 < stats["no_click_share"] < 1.0
    assert result["searches"] == 2000 and result["bot_searches"] == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_every_format_ingests_with_the_expected_counts(settings: Settings, fmt: str) -> None:
    sim = simulate(settings, START, 1, params=SMALL, fmt=fmt)
    assert Store.from_settings(settings).list_files("landing") == [f"landing/catalog/dt=2026-03-01/snapshot.{fmt}",
                                                                   f"landing/clicks/dt=2026-03-01/part-0.{fmt}"]
    got = ingest_dates(settings, [START])
    assert got["rows_read"] == sim["lines"]
    assert got["quarantined"] == sim["malformed_lines"] == SMALL.malformed_per_day
    assert got["duplicates"] == sim["duplicate_lines"]
    assert got["bot_rows"] == sim["bot_rows"] and got["bot_users"] == SMALL.bots_per_day
    assert got["accepted"] == sim["lines"] - sim["malformed_lines"] - sim["duplicate_lines"] - sim["bot_rows"]


def test_params_overrides_and_validation() -> None:
    params = SimParams().with_overrides({"searches_per_day": "500", "attract_by_grade": "0.1,0.2,0.3,0.4"})
    assert params.searches_per_day == 500 and params.attract_by_grade == (0.1, 0.2, 0.3, 0.4)
    with pytest.raises(ConfigError, match="unknown simulator parameter 'nope'"):
        SimParams().with_overrides({"nope": "1"})
    with pytest.raises(ConfigError, match="exam_top"):
        SimParams(exam_top=1.5).validate()
    with pytest.raises(ConfigError, match="searches_per_day: 'many' is not of type int"):
        SimParams().with_overrides({"searches_per_day": "many"})
    for name, text in (("exam_decay", "nan"), ("think_seconds", "inf"), ("attract_by_grade", "0.1,nan,0.3,0.4")):
        with pytest.raises(ConfigError, match=f"simulator parameter {name}=.* is not a finite number"):
            SimParams().with_overrides({name: text})
    with pytest.raises(ConfigError, match="searches_per_day=5000000 is above its limit 1,000,000"):
        SimParams().with_overrides({"searches_per_day": "5000000"})


def test_days_are_bounded_and_the_disk_is_checked_first(settings: Settings, capsys: pytest.CaptureFixture[str],
                                                         tiny_disk: Path) -> None:
    for days in ("100000000", "0", "3661"):
        assert main(["simulate", "--days", days, "--store", settings.store]) == 2
        assert "--days: " in capsys.readouterr().err and not Path(settings.store, "landing").exists()
    store = tiny_disk / "store"  # 64 KiB: a day of logs does not fit
    assert main(["simulate", "--days", "2", "--store", str(store), "--data-dir", str(settings.data_dir)]) == 2
    err = capsys.readouterr().err
    # each size in the unit that shows it: the 64 KiB disk's free space is never "0.00 GB"
    assert re.match(rf"deepsent: error: store {store}: simulating 2 day\(s\) needs about [0-9.]+ MB and [0-9.]+ kB are "
                    "free; ask for less or free space", err)
    assert err.count("\n") == 1 and not (store / "landing").exists()  # nothing written
