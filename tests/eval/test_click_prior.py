"""Cold start in ``compare --retrieval``: BM25 with a click prior (the prior, its weight fitted on held-out clicks),
the cold/warm split of the judged queries, and both in the comparison's output."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from encoders.search.bm25 import BM25Index
from eval.baselines.bm25_prior import PRIOR_KEY, click_counts, click_prior, fit_prior_weight, prior_ranking
from eval.judgments import load_judged_set
from eval.model_scorer import ModelScorer
from eval.results import RetrievalCompareResult
from eval.retrieval.compare import retrieval_compare
from eval.retrieval.metrics import query_splits
from pipeline.features.click_lists import write_held_out_clicks
from pipeline.storage.schemas import PAIRS_SCHEMA
from pipeline.storage.store import Store
from tests.eval.test_retrieval_cli import HashedWords, _corpus_and_judgments


def _pairs(store: Store, split: str, rows: list[tuple[str, str, int]]) -> None:
    """Write ``pairs/<split>.parquet`` of (query, doc_id, clicks) rows."""
    store.write_table(f"pairs/{split}.parquet", pa.Table.from_pylist(
        [{"query": q, "doc_id": d, "title": f"title {d}", "clicks": c, "impressions": 2 * c, "split": split}
         for q, d, c in rows], schema=PAIRS_SCHEMA))


def test_the_prior_is_log_clicks_in_the_training_pairs_scaled_by_the_most(store: Store) -> None:
    assert click_counts(store) == {}  # no training pairs: no prior
    _pairs(store, "train", [("drill", "a", 3), ("cordless drill", "a", 1), ("hose", "b", 1)])
    _pairs(store, "valid", [("lamp", "b", 50), ("lamp", "c", 9)])  # held out: never counted
    counts = click_counts(store)
    assert counts == {"a": 4, "b": 1}
    prior = click_prior(counts, ["c", "b", "a", "z"])
    assert prior.tolist() == pytest.approx([0.0, math.log(2) / math.log(5), 1.0, 0.0])
    assert click_prior({}, ["a", "b"]).tolist() == [0.0, 0.0]


def test_the_ranking_is_min_max_bm25_mixed_with_the_prior() -> None:
    top = [(4, 9.0), (1, 6.0), (7, 3.0)]  # BM25's candidates, best first: min-max 1, 0.5, 0
    prior = np.zeros(8)
    prior[[1, 4, 7]] = [0.2, 0.0, 1.0]
    assert prior_ranking(top, prior, 0.0) == [4, 1, 7]
    # w = 0.6: row 4 0.4, row 1 0.4·0.5 + 0.6·0.2 = 0.32, row 7 0.6
    assert prior_ranking(top, prior, 0.6) == [7, 4, 1]
    assert prior_ranking(top, prior, 1.0) == [7, 1, 4] and prior_ranking([], prior, 0.5) == []


def _drill_corpus() -> tuple[list[str], BM25Index]:
    """Twelve titles with 'drill': row 0 the best BM25 match (the shortest), row 11 the worst (the longest)."""
    titles = ["drill"] + [f"drill {' '.join(f'w{i}x{j}' for j in range(i))}" for i in range(1, 12)]
    titles += ["hose", "lamp"]
    bm25 = BM25Index()
    bm25.fit_corpus(titles)
    return [str(row) for row in range(len(titles))], bm25


def test_the_weight_is_fitted_where_the_prior_wins_on_held_out_clicks() -> None:
    """Held-out clicks on BM25's worst candidate, the most clicked product: the prior must get a weight, the
    smallest of the grid that brings the click into the top 10."""
    doc_ids, bm25 = _drill_corpus()
    prior = click_prior({"11": 100, "3": 1}, doc_ids)
    fit = fit_prior_weight(bm25, prior, doc_ids, {"drill": {"11"}})
    assert fit.queries == 1 and fit.recall[0.0] == 0.0 and fit.weight > 0 and fit.recall[fit.weight] == 1.0
    assert all(fit.recall[w] < 1.0 for w in fit.recall if w < fit.weight)
    assert doc_ids.index("11") in prior_ranking([(r, float(s)) for r, s in enumerate(bm25.corpus_scores("drill"))
                                                 if s > 0], prior, fit.weight)[:10]


def test_the_weight_stays_zero_where_the_prior_loses_on_held_out_clicks() -> None:
    """Held-out clicks on BM25's best match, never clicked in training, beside popular decoys: w = 0 (BM25), and
    a tie (no held-out clicks to judge by) goes to the smaller weight too."""
    doc_ids, bm25 = _drill_corpus()
    prior = click_prior({str(row): 100 for row in range(1, 12)}, doc_ids)
    fit = fit_prior_weight(bm25, prior, doc_ids, {"drill": {"0"}})
    assert fit.weight == 0.0 and fit.recall[0.0] == 1.0 and fit.recall[1.0] == 0.0
    assert fit_prior_weight(bm25, prior, doc_ids, {"hose": {"12"}}).weight == 0.0  # every weight finds it
    assert fit_prior_weight(bm25, prior, doc_ids, {}).weight == 0.0


def test_a_query_is_cold_when_none_of_its_relevant_products_was_clicked(tmp_path: Path) -> None:
    path = tmp_path / "judged.csv"
    path.write_text("query,title,label,doc_id\n"
                    "drill,red drill,2,d1\ndrill,blue drill,0,d2\n"  # relevant d1 clicked: warm
                    "hose,garden hose,1,h1\nhose,hose reel,0,d2\n"  # only the irrelevant d2 clicked: cold
                    "lamp,desk lamp,3,l1\nlamp,floor lamp,1,l2\n"  # l2 clicked: warm
                    "saw,saw blade,0,d2\n"  # no relevant product: neither
                    "rake,leaf rake,2,r1\n", encoding="utf-8")  # never clicked: cold
    judged = load_judged_set(path)
    splits = query_splits(judged, {"d1": 3, "d2": 7, "l2": 1})
    names = {split: sorted({text for qid, text in zip(judged.qid.tolist(), judged.query) if mask[qid]})
             for split, mask in splits.items()}
    assert names == {"cold": ["hose", "rake"], "warm": ["drill", "lamp"]}


def test_compare_retrieval_carries_the_prior_row_and_both_splits(settings, store: Store, tmp_path: Path) -> None:
    corpus, _ = _corpus_and_judgments(tmp_path)
    by_word: dict[str, list[int]] = {}
    for word in ("drill", "hose", "lamp", "saw", "rake", "fan", "pipe", "sink", "door"):  # no row judged twice
        taken = {row for rows in by_word.values() for row in rows}
        by_word[word] = [row for row, title in enumerate(corpus.titles) if word in title.split() and row not in taken][:4]
    lines = ["query,title,label,doc_id"]
    for word, rows in list(by_word.items())[:6]:
        lines += [f"{word},{corpus.titles[r]},{2 if i < 2 else 0},{r}" for i, r in enumerate(rows)]
    path = tmp_path / "judged_words.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    warm = ("drill", "lamp", "fan")  # one relevant product of each clicked in training
    _pairs(store, "train", [(f"{w} deal", str(by_word[w][1]), 5) for w in warm] + [("saw", str(by_word["saw"][3]), 2)])
    _pairs(store, "valid", [(f"{w} sale", str(by_word[w][0]), 1) for w in ("hose", "pipe", "sink", "door")])
    write_held_out_clicks(store, 7)  # what featurize draws once from the pairs
    result = retrieval_compare(settings, judgments=path, baselines=["bm25"], models=["stand-in"], corpus=corpus,
                               model_scorer=lambda uri: ModelScorer(uri, loader=lambda u, s: HashedWords()))
    rows = {row["key"]: row for row in result.rows}
    assert list(rows) == ["bm25", PRIOR_KEY, "stand-in", "stand-in#rrf", "stand-in#rerank", "stand-in#linear"]
    prior = rows[PRIOR_KEY]
    assert prior["name"] == "BM25 + click prior" and prior["mode"] == PRIOR_KEY and prior["prior_weight"] in np.round(
        np.arange(21) * 0.05, 2) and prior["p:ndcg@10"] is not None and "vs_prior" not in prior
    assert "vs_prior" not in rows["bm25"] and all("vs_prior" in rows[k] for k in rows if k.startswith("stand-in"))
    assert sum(row["served_default"] for row in result.rows) == 1
    cold_start = result.cold_start
    assert cold_start["prior"]["clicked_products"] == 4 and cold_start["prior"]["queries"] == 2  # half of 4 held out
    assert {split: part["queries"] for split, part in cold_start["splits"].items()} == {"cold": 3, "warm": 3}
    metrics = ("recall@10", "recall@100", "ndcg@10")
    by_split = {split: {row["key"]: row for row in part["rows"]} for split, part in cold_start["splits"].items()}
    for split_rows in by_split.values():
        assert list(split_rows) == list(rows)
        assert "vs_bm25" not in split_rows["bm25"] and "vs_prior" not in split_rows[PRIOR_KEY]
        for key, row in split_rows.items():  # each test within the split is of that split's means
            for name, other in (("vs_bm25", "bm25"), ("vs_prior", PRIOR_KEY)):
                assert key == other or all(row[name][m]["diff"] == pytest.approx(row[m] - split_rows[other][m])
                                           for m in metrics)
    for key, row in rows.items():  # the two splits (3 queries each) are every evaluated query
        assert all(row[m] == pytest.approx((by_split["cold"][key][m] + by_split["warm"][key][m]) / 2) for m in metrics)
    for text in ("BM25 + click prior (w ", "vs BM25 + click prior", "| cold (3) | BM25 |", "| warm (3) | hashed words",
                 "never clicked in the training pairs"):
        assert text in result.table_markdown
    saved = json.loads(Path(result.report["retrieval.json"]).read_text())
    assert saved["cold_start"]["splits"]["cold"]["queries"] == 3
    assert RetrievalCompareResult.from_dict(result.to_dict()).cold_start == json.loads(json.dumps(cold_start))
