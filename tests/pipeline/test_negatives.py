"""Random negatives: never the clicked or a co-clicked title, n distinct per pair, same for any worker count."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.stages.featurize import judged_pairs, write_judged_pairs
from pipeline.core.config import Settings
from pipeline.features.featurize import ShardContext, build_shard, featurize, plan_shards
from pipeline.features.negatives import TitlePool, partition_rng
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store


@pytest.fixture(scope="module")
def pairs(data_dir: object) -> dict[str, pa.Table]:
    """Real judged pairs of 700 queries (train and valid)."""
    tables = judged_pairs(Settings.from_env(), max_queries=700)
    return {s: t.append_column("pair_id", pa.array(np.arange(t.num_rows, dtype=np.int64))) for s, t in tables.items()}


def _clicked_titles(*tables: pa.Table) -> dict[str, set[str]]:
    clicked: dict[str, set[str]] = defaultdict(set)
    for table in tables:
        for query, title in zip(table["query"].to_pylist(), table["title"].to_pylist()):
            clicked[query].add(title)
    return clicked


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_negatives_are_distinct_and_never_clicked_for_the_query(pairs: dict[str, pa.Table], n: int) -> None:
    train, valid = pairs["train"], pairs["valid"]
    pool = TitlePool.build(train, pa.concat_tables([train, valid]))
    drawn = pool.sample(train["query"], n, partition_rng(7, "train", 0))
    assert drawn.shape == (train.num_rows, n) and drawn.min() >= 0 and drawn.max() < pool.size
    assert all(len(set(row)) == n for row in drawn.tolist())
    titles = pool.titles.to_pylist()
    clicked = _clicked_titles(train, valid)
    for query, title, row in zip(train["query"].to_pylist(), train["title"].to_pylist(), drawn.tolist()):
        negatives = {titles[i] for i in row}
        assert title not in negatives
        assert not negatives & clicked[query]


def test_pool_is_the_distinct_training_titles_with_their_smallest_doc_id(pairs: dict[str, pa.Table]) -> None:
    train = pairs["train"]
    pool = TitlePool.build(train, train)
    assert pool.titles.to_pylist() == sorted(set(train["title"].to_pylist()))
    smallest: dict[str, str] = {}
    for doc_id, title in zip(train["doc_id"].to_pylist(), train["title"].to_pylist()):
        smallest[title] = min(doc_id, smallest.get(title, doc_id))
    assert pool.doc_ids.to_pylist() == [smallest[t] for t in pool.titles.to_pylist()]


def test_draws_depend_on_seed_split_and_partition_only(pairs: dict[str, pa.Table]) -> None:
    train = pairs["train"]
    pool = TitlePool.build(train, train)
    queries = train["query"].slice(0, 300)
    first = pool.sample(queries, 4, partition_rng(7, "train", 3))
    assert np.array_equal(first, pool.sample(queries, 4, partition_rng(7, "train", 3)))
    assert not np.array_equal(first, pool.sample(queries, 4, partition_rng(7, "train", 4)))
    assert not np.array_equal(first, pool.sample(queries, 4, partition_rng(8, "train", 3)))


def test_a_query_that_clicked_almost_the_whole_pool_is_refused() -> None:
    tiny = pa.table({"query": ["q", "q", "q", "r"], "doc_id": ["1", "2", "3", "4"], "title": ["a", "b", "c", "d"]})
    pool = TitlePool.build(tiny, tiny)
    assert pool.short_rows(tiny["query"], 2).tolist() == [0, 1, 2]  # q leaves only "d"
    assert pool.sample(tiny["query"], 1, partition_rng(1, "train", 0))[:3].ravel().tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="cannot draw 2 negatives"):
        pool.sample(tiny["query"], 2, partition_rng(1, "train", 0))


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_shards_hold_one_clicked_title_and_n_negatives(pairs: dict[str, pa.Table], n: int) -> None:
    train = pairs["train"]
    vocab = TrigramVocab.build([pa.concat_arrays([train["query"].combine_chunks(), train["title"].combine_chunks()])])
    ctx = ShardContext(vocab, {"train": TitlePool.build(train, train)}, n, 30, 7)
    job = plan_shards("train", train, 7, 500)[0]
    table, stats = build_shard(job, ctx)
    assert stats["rows"] == table.num_rows == job.rows.num_rows > 400
    assert set(pc.list_value_length(table["d_ids"]).to_pylist()) == {n + 1}
    assert set(pc.list_value_length(table["neg_doc_ids"]).to_pylist()) == {n}
    assert [d[0] for d in table["d_ids"].to_pylist()] == [vocab.encode(t, 30)[0] for t in table["title"].to_pylist()]


def test_featurize_gives_identical_shards_on_1_and_2_workers(settings: Settings, store: Store) -> None:
    write_judged_pairs(store, settings, max_queries=700)
    one = featurize(settings.with_overrides(dask_workers=1), shard_rows=700)
    first = {p: store.read_bytes(p) for p in store.list_files(f"features/{one.version}")}
    two = featurize(settings.with_overrides(dask_workers=2), shard_rows=700)
    assert two.version == one.version and len(one.uris["train"]) >= 4
    assert {p: store.read_bytes(p) for p in store.list_files(f"features/{two.version}")} == first
