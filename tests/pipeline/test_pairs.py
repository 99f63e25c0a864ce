"""Pairs: clicked (query, title) pairs with counts, split train/valid by a seeded query hash."""
from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.features.pairs import build_pairs, query_split
from pipeline.ingest.ingest import ingest_dates
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.schemas import PAIRS_SCHEMA
from pipeline.storage.store import Store

START = dt.date(2026, 2, 1)
PARAMS = SimParams(searches_per_day=300, users=150, bots_per_day=1, bot_searches_min=12, bot_searches_max=15)


@pytest.fixture()
def ingested(settings: Settings) -> Store:
    simulate(settings, START, 2, params=PARAMS)
    ingest_dates(settings, [START, START + dt.timedelta(days=1)])
    return Store.from_settings(settings)


def test_pairs_match_a_plain_count_of_the_clicks(settings: Settings, ingested: Store) -> None:
    result = build_pairs(settings, valid_fraction=0.3, seed=3)
    clicks = ingested.read_table("clicks").to_pylist()
    shown = Counter((r["query"], r["doc_id"]) for r in clicks)
    clicked = Counter((r["query"], r["doc_id"]) for r in clicks if r["clicked"])
    train, valid = ingested.read_table("pairs/train.parquet"), ingested.read_table("pairs/valid.parquet")
    assert train.schema == valid.schema == PAIRS_SCHEMA
    pairs = train.to_pylist() + valid.to_pylist()
    assert {(p["query"], p["doc_id"]): p["clicks"] for p in pairs} == dict(clicked)
    assert all(p["impressions"] == shown[(p["query"], p["doc_id"])] for p in pairs)
    assert result["clicked_rows"] == sum(clicked.values()) and result["rows_read"] == len(clicks)
    assert {p["split"] for p in train.to_pylist()} == {"train"} and {p["split"] for p in valid.to_pylist()} == {"valid"}
    assert not set(train.column("query").to_pylist()) & set(valid.column("query").to_pylist())
    keys = [(p["query"], p["doc_id"]) for p in train.to_pylist()]
    assert keys == sorted(keys)
    titles: dict[tuple[str, str], str] = {}  # a retitled product shows two titles: a pair keeps the smaller one
    for r in clicks:
        key = (r["query"], r["doc_id"])
        titles[key] = min(titles.get(key, r["title"]), r["title"])
    assert all(p["title"] == titles[(p["query"], p["doc_id"])] for p in pairs)


def test_rerun_same_bytes_and_seeded_split(settings: Settings, ingested: Store) -> None:
    build_pairs(settings)
    first = [ingested.read_bytes(f"pairs/{n}.parquet") for n in ("train", "valid")]
    build_pairs(settings)
    assert [ingested.read_bytes(f"pairs/{n}.parquet") for n in ("train", "valid")] == first
    assert ingested.list_files("pairs") == ["pairs/train.parquet", "pairs/valid.parquet"]
    build_pairs(settings, seed=8)
    assert ingested.read_bytes("pairs/valid.parquet") != first[1]
    everything = build_pairs(settings, valid_fraction=0.0)
    assert everything["valid_pairs"] == 0 and everything["train_pairs"] == everything["pairs"]


def test_query_split_is_stable_and_near_the_fraction() -> None:
    queries = [f"query {i}" for i in range(20000)]
    split = query_split(queries, 0.1, seed=7)
    assert 0.09 < split.count("valid") / len(split) < 0.11
    assert query_split(queries[:50], 0.1, seed=7) == split[:50]


def test_errors(settings: Settings) -> None:
    with pytest.raises(DeepsentError, match="no ingested clicks"):
        build_pairs(settings)
    with pytest.raises(ConfigError, match="valid fraction"):
        build_pairs(settings, valid_fraction=1.0)


@pytest.mark.heavy  # over 10 s: left out of make check
def test_cli_pairs_json(settings: Settings, ingested: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pairs", "--valid-fraction", "0.2", "--json", "--store", settings.store]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["train_pairs"] + result["valid_pairs"] == result["pairs"] > 0


@pytest.mark.heavy  # over 10 s: left out of make check
def test_damaged_clicks_partitions_are_one_line_never_pairs(settings: Settings, ingested: Store,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from pipeline.storage.artifacts import ArtifactError

    clicks = ingested.local_path("clicks/dt=2026-02-02/part-0.parquet")
    original = clicks.read_bytes()
    manifest = ingested.local_path("clicks/_manifests/dt=2026-02-02.json")
    for damage, reason in ((lambda: clicks.write_bytes(original[:-100]), "bytes where"),
                           (lambda: clicks.write_bytes(original[:-4] + b"XXXX"), "its checksum differs"),
                           (lambda: shutil.copyfile(clicks, clicks.with_name("part-1.parquet")),
                            "a clicks file the ingest did not write"),
                           (lambda: manifest.unlink(), "clicks without their ingest manifest")):
        damage()
        with pytest.raises(ArtifactError, match=f"{reason}.*rebuild it with `deepsent ingest --date 2026-02-02`"):
            build_pairs(settings)
        assert main(["pairs", "--store", settings.store]) == 2
        assert len(capsys.readouterr().err.splitlines()) == 1 and not ingested.exists("pairs/train.parquet")
        ingest_dates(settings, [START + dt.timedelta(days=1)])  # the rebuild the message names
        clicks.with_name("part-1.parquet").unlink(missing_ok=True)
    assert build_pairs(settings)["train_pairs"] > 0
