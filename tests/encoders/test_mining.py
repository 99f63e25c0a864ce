"""Negatives mined for retrieval training: BM25's top titles of the split that nobody clicked for the query."""
from __future__ import annotations

import pyarrow.compute as pc
import pytest

from bench.stages.featurize import write_judged_pairs
from deepsent.cli import main
from encoders.search.bm25 import BM25Index
from encoders.search.mining import DEPTH, mine_negatives, mined_path
from encoders.search.modes import lexical_top
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.features.feature_files import read_manifest
from pipeline.features.featurize import featurize
from pipeline.storage.store import Store


@pytest.fixture()
def with_pairs(settings: Settings, store: Store) -> Settings:
    write_judged_pairs(store, settings, max_queries=300)
    return settings


def test_bm25_mines_the_top_unclicked_titles_of_the_split(with_pairs: Settings, store: Store) -> None:
    manifest = mine_negatives(with_pairs, "bm25")
    pairs = {s: store.read_table(f"pairs/{s}.parquet") for s in ("train", "valid")}
    clicked = {(q, t) for p in pairs.values() for q, t in zip(p["query"].to_pylist(), p["title"].to_pylist())}
    for split, table in pairs.items():
        mined = store.read_table(mined_path("bm25", split))
        titles = sorted(set(table["title"].to_pylist()))
        rows = list(zip(mined["query"].to_pylist(), mined["title"].to_pylist()))
        assert rows and not set(rows) & clicked  # never a title clicked for the query, in either split
        assert set(mined["title"].to_pylist()) <= set(titles)  # the split's own titles only
        assert manifest["counts"][split]["mined"] == mined.num_rows
        # each query's list is BM25's own top DEPTH over the split's titles, less the clicked ones, in rank order
        index = BM25Index()
        index.fit_corpus(titles)
        for query in sorted(set(mined["query"].to_pylist()))[:20]:
            expected = [titles[r] for r, _ in lexical_top(index.corpus_scores(query), DEPTH) if (query, titles[r]) not in clicked]
            assert [t for q, t in rows if q == query] == expected


def test_featurize_draws_half_its_negatives_from_the_mined_titles(with_pairs: Settings, store: Store,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"mined/bm25/train.parquet: no mined titles; `deepsent featurize --negative-source"):
        featurize(with_pairs, negatives=4, negative_source="bm25")
    assert main(["featurize", "--negative-source", "bm25", "--negatives", "4", "--store", with_pairs.store,
                 "--data-dir", str(with_pairs.data_dir)]) == 0  # the command mines first
    manifest = read_manifest(store)
    assert manifest["params"]["negative_source"] == "bm25" and manifest["negative_source"]["skipped_per_pair"] == 2
    train = store.read_table(f"features/{manifest['version']}/train")
    mined = store.read_table(mined_path("bm25", "train"))
    by_query: dict[str, set[str]] = {}
    for q, d in zip(mined["query"].to_pylist(), mined["doc_id"].to_pylist()):
        by_query.setdefault(q, set()).add(d)
    drawn = manifest["splits"]["train"]["negatives"]
    assert drawn["skipped_negatives"] + drawn["random_fill"] == 2 * train.num_rows and drawn["skipped_negatives"] > 0
    hits = sum(len(set(negs[:2]) & by_query.get(q, set())) for q, negs in
               zip(train["query"].to_pylist(), train["neg_doc_ids"].to_pylist()))
    assert hits == drawn["skipped_negatives"]  # the first n // 2 negatives of a pair are its query's mined titles
    assert set(pc.list_value_length(train["neg_doc_ids"]).to_pylist()) == {4}
    again = featurize(with_pairs, negatives=4, negative_source="bm25")  # mined files fingerprinted: same version
    assert again.version == manifest["version"]


def test_the_chains_mine_stage_mines_each_source_of_the_grid_once(with_pairs: Settings, store: Store) -> None:
    from deepsent import stages
    from deepsent.chain_results import ChainRun
    from deepsent.profiles import ModelSpec, Profile

    plain = Profile("plain", 0, (ModelSpec("lstm"),), ())
    assert stages.mine(ChainRun(with_pairs, plain)).sources == {}  # random and skipped titles mine nothing
    assert not store.exists(mined_path("bm25", "train"))
    grid = Profile("mined", 0, (ModelSpec("lstm", negative_source="bm25"), ModelSpec("lstm", negatives=2,
                                                                                  negative_source="bm25")), ())
    result = stages.mine(ChainRun(with_pairs, grid))
    assert list(result.sources) == ["bm25"] and "bm25" in result.summary
    assert result.sources["bm25"]["train"]["mined"] == store.read_table(mined_path("bm25", "train")).num_rows > 0
