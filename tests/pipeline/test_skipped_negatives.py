"""Negatives from the log: titles shown for the query and never clicked, above or just below the click first."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline.core.config import Settings
from pipeline.features.feature_files import check_skipped, read_manifest
from pipeline.features.featurize import featurize
from pipeline.features.negatives import MIXED, SKIPPED, TitlePool, draw_negatives, partition_rng, skipped_quota
from pipeline.features.pair_check import check_pairs
from pipeline.features.pairs import build_pairs
from pipeline.features.skipped import NEAR_CLICK, SkipIndex, combine_skipped, skipped_in_partition
from pipeline.storage.quarantine import Quarantine
from pipeline.storage.schemas import PAIRS_SCHEMA, SKIPPED_SCHEMA
from pipeline.storage.store import Store


def generated_log(rng: np.random.Generator, impressions: int = 120, queries: int = 15,
                  titles: int = 60) -> pa.Table:
    """Impressions of 3..8 results (positions 1..k) for random queries, 0..2 random clicks each.

    A title's doc id is ``d<i>``; every query shows titles from its own overlapping window, so the
    same title is shown for several queries and clicked for some of them.
    """
    rows: dict[str, list] = defaultdict(list)
    for imp in range(impressions):
        q = int(rng.integers(queries))
        shown = rng.choice(np.arange(q * 3, q * 3 + 12) % titles, size=int(rng.integers(3, 9)), replace=False)
        clicks = set(rng.choice(len(shown), size=int(rng.integers(0, 3)), replace=False).tolist())
        for pos, t in enumerate(shown.tolist()):
            rows["impression_id"].append(f"i{imp}")
            rows["query"].append(f"query {q}")
            rows["doc_id"].append(f"d{t:03d}")
            rows["title"].append(f"title {t}")
            rows["position"].append(pos + 1)
            rows["clicked"].append(pos in clicks)
    return pa.table({**rows, "position": pa.array(rows["position"], pa.int32())})


def _clicked_pairs(log: pa.Table) -> pa.Table:
    clicked = log.filter(log["clicked"]).group_by(["query", "doc_id", "title"]).aggregate([])
    return clicked.sort_by([("query", "ascending"), ("doc_id", "ascending")])


def _near_titles(log: pa.Table) -> dict[tuple[str, str], set[str]]:
    """(query, clicked doc) -> titles shown above it or directly below it, unclicked, in its impressions."""
    by_imp: dict[str, list[dict]] = defaultdict(list)
    for row in log.to_pylist():
        by_imp[row["impression_id"]].append(row)
    near: dict[tuple[str, str], set[str]] = defaultdict(set)
    for rows in by_imp.values():
        for click in (r for r in rows if r["clicked"]):
            for r in rows:
                if not r["clicked"] and (r["position"] < click["position"] or r["position"] == click["position"] + 1):
                    near[(click["query"], click["doc_id"])].add(r["title"])
    return near


@pytest.mark.parametrize("source", [SKIPPED, MIXED])
def test_skipped_negatives_are_shown_unclicked_and_near_the_click_first(source: str) -> None:
    for trial in range(25):
        rng = np.random.default_rng(trial)
        log = generated_log(rng)
        starts = np.flatnonzero(np.r_[True, np.array(log["impression_id"].to_pylist()[1:]) != np.array(
            log["impression_id"].to_pylist()[:-1])])
        cut = int(rng.choice(starts[1:]))  # two partitions, as two days of the log (an impression stays whole)
        skipped = combine_skipped([skipped_in_partition(log.slice(0, cut)), skipped_in_partition(log.slice(cut))],
                                  _clicked_pairs(log))
        pairs = _clicked_pairs(log).append_column("pair_id", pa.array(np.arange(_clicked_pairs(log).num_rows)))
        n = int(rng.integers(1, 7))
        pool, index = TitlePool.build(pairs, pairs), SkipIndex.build(skipped)
        short = set(pool.short_rows(pairs["query"], n).tolist())
        rows = pairs.take(pa.array([i for i in range(pairs.num_rows) if i not in short]))
        drawn = draw_negatives(rows, n, source, pool, index, partition_rng(trial, "train", 0))
        again = draw_negatives(rows, n, source, pool, index, partition_rng(trial, "train", 0))
        assert drawn.titles.equals(again.titles) and drawn.doc_ids.equals(again.doc_ids)
        shown = {(r["query"], r["title"]) for r in log.to_pylist()}
        clicked = {(r["query"], r["title"]) for r in log.to_pylist() if r["clicked"]}
        near = _near_titles(log)
        titles = np.array(drawn.titles.to_pylist(), dtype=object).reshape(rows.num_rows, n)
        quota = skipped_quota(source, n)
        for r, (query, doc, title) in enumerate(zip(rows["query"].to_pylist(), rows["doc_id"].to_pylist(),
                                                    rows["title"].to_pylist())):
            negs = titles[r].tolist()
            assert len(set(negs)) == n and title not in negs
            assert not any((query, t) in clicked for t in negs)
            from_log = [t for t, flag in zip(negs, drawn.from_log[r]) if flag]
            assert all((query, t) in shown for t in from_log)
            available = {t for q, t in shown if q == query and (q, t) not in clicked}
            assert len(from_log) == min(quota, len(available))
            near_unclicked = {t for t in near[(query, doc)] if (query, t) not in clicked}
            assert sum(t in near_unclicked for t in from_log) == min(len(from_log), len(near_unclicked))
        assert drawn.stats["skipped_negatives"] == int(drawn.from_log.sum())
        assert drawn.stats["random_fill"] == rows.num_rows * quota - drawn.stats["skipped_negatives"]


def test_tier_one_is_above_or_just_below_the_click() -> None:
    log = pa.table({"impression_id": ["a"] * 5, "query": ["q"] * 5, "doc_id": ["1", "2", "3", "4", "5"],
                    "title": ["t1", "t2", "t3", "t4", "t5"], "position": pa.array([1, 2, 3, 4, 5], pa.int32()),
                    "clicked": [False, False, True, False, False]})
    skipped = combine_skipped([skipped_in_partition(log)], _clicked_pairs(log))
    near = skipped.filter(pc.equal(skipped["tier"], NEAR_CLICK))
    assert near["title"].to_pylist() == ["t1", "t2", "t4"] and set(near["clicked_doc_id"].to_pylist()) == {"3"}
    assert sorted(skipped.filter(pc.equal(skipped["tier"], 2))["title"].to_pylist()) == ["t1", "t2", "t4", "t5"]


def _write_log(store: Store, log: pa.Table) -> None:
    """``log`` as the clicks of 2026-01-01, with the manifest ingest records for them (checked by ``pairs``)."""
    from pipeline.storage.artifacts import file_facts

    written = store.write_table("clicks/dt=2026-01-01/part-0.parquet", log)
    store.write_json("clicks/_manifests/dt=2026-01-01.json",
                     {"date": "2026-01-01", "clicks_files": file_facts(store, "clicks/dt=2026-01-01", [written])})


def test_featurize_from_the_log_counts_rows_records_the_source_and_repeats_bytes(settings: Settings) -> None:
    store = Store.from_settings(settings)
    _write_log(store, generated_log(np.random.default_rng(5), impressions=400, queries=30, titles=150))
    build_pairs(settings, valid_fraction=0.3, seed=7)
    train = store.read_table("pairs/train.parquet")
    bad = pa.table({c: [v] for c, v in zip(train.column_names, ["", "d999", "title 1", 1, 1, "train"])},
                   schema=train.schema)
    store.write_table("pairs/train.parquet", pa.concat_tables([train, bad]))
    valid_queries = set(store.read_table("pairs/valid.parquet")["query"].to_pylist())
    assert not valid_queries & set(store.read_table("skipped/train.parquet")["query"].to_pylist())
    random = featurize(settings, negatives=3, shard_rows=64)
    first = featurize(settings, negatives=3, shard_rows=64, negative_source=SKIPPED)
    shard_bytes = {uri: open(uri, "rb").read() for uri in first.uris["train"] + first.uris["valid"]}
    again = featurize(settings, negatives=3, shard_rows=64, negative_source=SKIPPED)
    assert again.version == first.version != random.version
    assert {uri: open(uri, "rb").read() for uri in again.uris["train"] + again.uris["valid"]} == shard_bytes
    manifest = read_manifest(store, first.version)
    assert manifest["negative_source"]["name"] == SKIPPED and manifest["params"]["negative_source"] == SKIPPED
    assert "negative_source" not in read_manifest(store, random.version)["params"]
    counts = manifest["splits"]["train"]
    assert counts["rows_in"] == train.num_rows + 1 == counts["rows_out"] + counts["rows_quarantined"]
    assert counts["rows_quarantined"] == 1
    drawn = counts["negatives"]
    assert drawn["skipped_negatives"] + drawn["random_negatives"] == 3 * counts["rows_out"]
    # every negative doc of a training pair is a training title or shown for a training query: nothing from valid
    train_docs = set(train["doc_id"].to_pylist()) | set(store.read_table("skipped/train.parquet")["doc_id"].to_pylist())
    features = store.read_table(f"features/{first.version}/train")
    assert {d for docs in features["neg_doc_ids"].to_pylist() for d in docs} <= train_docs
    assert json.loads(json.dumps(manifest["negative_source"]["log"]["train"]))["rows_quarantined"] == 0


def test_a_bad_or_clicked_skipped_row_is_quarantined_with_its_file_row_and_reason(store: Store) -> None:
    pairs = pa.table({"query": ["q a", "q b"], "doc_id": ["1", "2"], "title": ["t one", "t two"], "clicks": [1, 1],
                      "impressions": [2, 2], "split": ["train", "train"]}, schema=PAIRS_SCHEMA)
    store.write_table("pairs/train.parquet", pairs)
    store.write_table("pairs/valid.parquet", pairs.slice(0, 0))
    skipped = pa.table({"query": ["q a", "q a", "q a"], "clicked_doc_id": ["1", "", ""], "doc_id": ["3", "4", "1"],
                        "title": ["t three", "", "t one"], "tier": pa.array([1, 2, 2], pa.int8()),
                        "shown": [1, 1, 1], "split": ["train"] * 3}, schema=SKIPPED_SCHEMA)
    store.write_table("skipped/train.parquet", skipped)
    store.write_table("skipped/valid.parquet", skipped.slice(0, 0))
    quarantine = Quarantine("featurize")
    checked = {s: check_pairs(store, f"pairs/{s}.parquet", s, quarantine) for s in ("train", "valid")}
    result = check_skipped(store, checked, quarantine)["train"]
    assert result.clean["title"].to_pylist() == ["t three"]
    assert result.rows_in == 3 == result.clean.num_rows + result.rows_quarantined
    rows = quarantine.to_table().select(["source_file", "source_line", "reason"]).to_pylist()
    assert rows == [{"source_file": "skipped/train.parquet", "source_line": 2, "reason": "empty title"},
                    {"source_file": "skipped/train.parquet", "source_line": 3, "reason": "title is clicked for the query"}]


def test_mixed_negatives_with_one_negative_are_refused_in_one_line(settings: Settings) -> None:
    """With n = 1, mixed (n // 2 skipped) would be all random: the user is told, not silently served random."""
    from pipeline.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"mixed .* needs n >= 2 \(got n = 1"):
        featurize(settings, negatives=1, negative_source=MIXED)
