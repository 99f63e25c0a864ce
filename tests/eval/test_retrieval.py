"""Retrieval metrics on a hand-made corpus, the tie rule of corpus search, and the approximate index's recall."""
from __future__ import annotations

import math

import numpy as np
import pytest

from encoders.search import vector_index as vi
from encoders.search.topk import exact_index, search_rows, top_rows
from encoders.search.vectors import unit
from eval.judgments import JudgedSet, tie_ranks
from eval.metrics import ndcg
from eval.retrieval.compare import build_corpus
from eval.retrieval.metrics import Qrels, evaluate_rankings
from pipeline.core.errors import DeepsentError

# Query 0 judges rows 2 (grade 3), 5 (1), 9 (0), 11 (2); query 1 rows 0 (2), 1 (0); query 2 only row 4 (0).
QRELS = Qrels(qid=np.array([0, 0, 0, 0, 1, 1, 2]), row=np.array([2, 5, 9, 11, 0, 1, 4]),
              label=np.array([3, 1, 0, 2, 2, 0, 0]), num_queries=3)
RANKED = np.array([[7, 2, 4, 9, 5, 0, 1, 3, 6, 8, 11, 10],   # row 7 (unjudged) first; row 11 at rank 11
                   [3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11],
                   [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]])


def test_recall_and_ndcg_match_the_hand_computed_values() -> None:
    result = evaluate_rankings(RANKED, QRELS, num_rows=12)
    # query 0: relevant rows 2, 5, 11; the top 10 hold 2 and 5
    ideal0 = 7 + 3 / math.log2(3) + 1 / math.log2(4)
    expected = {"recall@10": [2 / 3, 1.0], "recall@100": [1.0, 1.0],
                "ndcg@10": [(7 / math.log2(3) + 1 / math.log2(6)) / ideal0, (3 / math.log2(3)) / 3]}
    for metric, values in expected.items():
        np.testing.assert_allclose(result.per_query[metric][:2], values, rtol=1e-12)
        assert math.isnan(result.per_query[metric][2])  # no positive grade: excluded, as in the re-ranking table
        assert result.mean(metric) == pytest.approx(np.mean(values), rel=1e-12)
    assert result.excluded.tolist() == [2]


def test_unjudged_titles_count_as_not_relevant_rather_than_being_dropped() -> None:
    result = evaluate_rankings(RANKED[:, :10], QRELS, num_rows=12, recall_ks=(1, 10), ndcg_k=10)
    # dropped, query 0's judged titles would rank 2, 9, 5 (then 11): recall@1 = 1/3 and recall@10 = 1
    assert result.per_query["recall@1"][0] == 0.0 and result.per_query["recall@10"][0] == pytest.approx(2 / 3)
    judged = JudgedSet("t", "t", "generic", ["a"] * 4, ["a"] * 4, ["x"] * 4, ["2", "9", "5", "11"],
                       np.array([3, 0, 1, 2]), np.zeros(4, np.int64), tie_ranks(["2", "9", "5", "11"]))
    dropped = ndcg(judged, np.array([4.0, 3.0, 2.0, 1.0]), ks=(10,)).per_query[10][0]
    assert result.per_query["ndcg@10"][0] < dropped - 0.05


def test_rankings_are_checked() -> None:
    with pytest.raises(DeepsentError, match="3 queries"):
        evaluate_rankings(RANKED[:2], QRELS, num_rows=12)
    with pytest.raises(DeepsentError, match="depth 5"):
        evaluate_rankings(RANKED[:, :5], QRELS, num_rows=12)
    twice = RANKED.copy()
    twice[0, 1] = 7
    with pytest.raises(DeepsentError, match="twice"):
        evaluate_rankings(twice, QRELS, num_rows=12)


def test_padding_is_not_read_as_a_row() -> None:
    padded = np.full((3, 12), -1)
    padded[:, :3] = RANKED[:, :3]  # -1 + query * rows would be row 11 of the previous query if it were read
    result = evaluate_rankings(padded, QRELS, num_rows=12)
    assert result.per_query["recall@100"][:2].tolist() == [1 / 3, 1.0]


def test_a_ranking_shorter_than_k_gets_no_credit_for_a_title_it_did_not_retrieve() -> None:
    judged = Qrels(qid=np.array([0]), row=np.array([15]), label=np.array([3]), num_queries=1)
    missed, found = np.full((1, 100), -1), np.full((1, 100), -1)
    missed[0, 0] = found[0, 0] = 2  # one unjudged title retrieved (a lexical first stage that matched one title)
    found[0, 1] = 15
    assert evaluate_rankings(missed, judged, num_rows=20).per_query["ndcg@10"].tolist() == [0.0]
    assert evaluate_rankings(found, judged, num_rows=20).per_query["ndcg@10"].tolist() == [pytest.approx(1 / math.log2(3))]
    longer = np.full((1, 100), -1)
    longer[0, :19] = [r for r in range(20) if r != 15]  # every other title retrieved, the judged one last: still 0
    assert evaluate_rankings(longer, judged, num_rows=20).per_query["ndcg@10"].tolist() == [0.0]


def _corpus_with_duplicates(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    docs = unit(rng.standard_normal((400, 16)).astype(np.float32))
    docs[[50, 120, 399]] = docs[7]  # exact ties: FAISS itself returns the highest row first
    queries = np.concatenate([docs[[7, 3]], rng.standard_normal((30, 16)).astype(np.float32)])
    return docs, queries


def _brute_force(docs: np.ndarray, queries: np.ndarray, depth: int) -> np.ndarray:
    scores = unit(queries).astype(np.float64) @ docs.astype(np.float64).T
    rows = np.broadcast_to(np.arange(len(docs)), scores.shape)
    return np.lexsort((rows, -scores), axis=1)[:, :depth]


@pytest.mark.parametrize("depth", [10, 100])
def test_exact_search_equals_a_brute_force_numpy_top_k_with_ties_by_ascending_row(depth: int) -> None:
    docs, queries = _corpus_with_duplicates()
    found = search_rows(exact_index(docs).index, queries, depth)
    np.testing.assert_array_equal(found, _brute_force(docs, queries, depth))
    assert found[0, :4].tolist() == [7, 50, 120, 399]


def test_a_tie_group_longer_than_the_fetch_is_cut_at_the_lowest_rows() -> None:
    docs, _ = _corpus_with_duplicates()
    docs[200:240] = docs[7]  # 44 copies in all: more than the depth plus the margin fetched
    found = search_rows(exact_index(docs).index, docs[[7]], 10)
    assert found[0].tolist() == [7, 50, 120] + list(range(200, 207))


def test_full_corpus_scores_rank_ties_by_ascending_row() -> None:
    scores = np.array([0.0, 2.0, 0.0, 2.0, 1.0, 0.0])
    assert top_rows(scores, 5).tolist() == [1, 3, 4, 0, 2]


def test_the_approximate_index_reaches_its_recall_on_clustered_vectors() -> None:
    rng = np.random.default_rng(3)
    centres = unit(rng.standard_normal((60, 16)).astype(np.float32))
    docs = unit(centres[rng.integers(0, 60, 3000)] + 0.3 * rng.standard_normal((3000, 16)).astype(np.float32))
    queries = unit(centres[rng.integers(0, 60, 200)] + 0.3 * rng.standard_normal((200, 16)).astype(np.float32))
    built = vi.build(vi.chunks(docs, 1000), len(docs), 16, seed=1, exact_max=0)
    assert built.kind == "IndexIVFScalarQuantizer" and built.params["nprobe"] < built.params["nlist"]  # approximate
    recall = vi.recall_at_k(search_rows(built.index, queries, 10), _brute_force(docs, queries, 10))
    assert 0.9 <= recall < 1.0


def test_the_corpus_is_in_ascending_document_id_order_and_holds_the_judged_documents() -> None:
    judged = JudgedSet("t", "t", "homedepot", ["q"] * 2, ["q"] * 2, ["new title", "other"], ["100", "9"],
                       np.array([1, 0]), np.zeros(2, np.int64), tie_ranks(["100", "9"]))
    corpus = build_corpus([("20", "b"), ("3", "a"), ("20", "b again"), ("9", "nine")], judged)
    assert corpus.doc_ids == ["3", "9", "20", "100"] and corpus.titles == ["a", "nine", "b", "new title"]
