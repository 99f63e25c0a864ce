"""NDCG@k: hand-computed cases, the tie rule, excluded queries, and parity with ranx on the real dev set."""
from __future__ import annotations

import math

import numpy as np
import pytest

from eval.judgments import MAX_GRADE, load_judged_set, tie_ranks
from eval.metrics import ndcg, ndcg_arrays


def _dcg(gains: list[int]) -> float:
    return sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))


def test_single_query_matches_hand_computation() -> None:
    labels = np.array([0, 3, 1, 2])
    scores = np.array([0.9, 0.8, 0.7, 0.1])  # ranking by score: grades 0, 3, 1, 2
    res = ndcg_arrays(np.zeros(4, dtype=np.int64), labels, scores, np.arange(4), ks=(1, 3, 10))
    assert res.per_query[1][0] == pytest.approx(0.0)
    assert res.per_query[3][0] == pytest.approx(_dcg([0, 3, 1]) / _dcg([3, 2, 1]))
    assert res.per_query[10][0] == pytest.approx(_dcg([0, 3, 1, 2]) / _dcg([3, 2, 1, 0]))


def test_ties_are_broken_by_ascending_doc_id_not_label() -> None:
    # all scores tie: the order is the doc-id order, numeric ("9" before "10"), whatever the labels
    doc_ids = ["10", "9", "100"]
    labels = np.array([3, 0, 1])
    res = ndcg_arrays(np.zeros(3, dtype=np.int64), labels, np.zeros(3), tie_ranks(doc_ids), ks=(1, 3))
    assert res.per_query[1][0] == pytest.approx(0.0)  # "9" (grade 0) first
    assert res.per_query[3][0] == pytest.approx(_dcg([0, 3, 1]) / _dcg([3, 1, 0]))


def test_tie_ranks_numeric_only_when_every_id_is_digits() -> None:
    assert tie_ranks(["10", "9", "100"]).tolist() == [1, 0, 2]
    assert tie_ranks(["10", "9", "a"]).tolist() == [0, 1, 2]  # string order: "10" < "9" < "a"


def test_queries_without_positive_grade_are_excluded_from_the_mean() -> None:
    qid = np.array([0, 0, 1, 1])
    labels = np.array([2, 0, 0, 0])
    res = ndcg_arrays(qid, labels, np.array([1.0, 0.0, 0.5, 0.2]), np.arange(4), ks=(1,))
    assert res.excluded.tolist() == [1]
    assert np.isnan(res.per_query[1][1])
    assert res.mean(1) == pytest.approx(1.0)
    assert res.valid(1).tolist() == [1.0]


def test_non_finite_scores_are_rejected() -> None:
    from pipeline.core.errors import DeepsentError

    with pytest.raises(DeepsentError, match="NaN"):
        ndcg_arrays(np.zeros(2, dtype=np.int64), np.array([1, 0]), np.array([np.nan, 1.0]), np.arange(2))


def test_labels_outside_the_grades_are_rejected_before_the_gain_overflows() -> None:
    # three titles of grade 1023 made the ideal DCG@3 infinite: NDCG was inf/inf = NaN for a
    # system ranking them first and 0.0 for one ranking them last, so valid() lost different queries
    from pipeline.core.errors import DeepsentError

    qid = np.array([0, 0, 0, 0, 1, 1])
    labels = np.array([1023, 1023, 1023, 0, 1, 0])
    with pytest.raises(DeepsentError, match=f"outside the grades 0..{MAX_GRADE}"):
        ndcg_arrays(qid, labels, np.arange(6.0), np.arange(6), ks=(3,))
    with pytest.raises(DeepsentError, match=f"outside the grades 0..{MAX_GRADE}"):
        ndcg_arrays(qid[:2], np.array([-1, 1]), np.arange(2.0), np.arange(2), ks=(3,))


def test_highest_grades_stay_finite_and_every_system_pairs_the_same_queries() -> None:
    # query 0: 30 titles of the highest grade and 2 zeros; query 1: no positive grade; query 2: mixed
    labels = np.array([MAX_GRADE] * 30 + [0, 0] + [0, 0] + [2, 0, 1])
    qid = np.repeat([0, 1, 2], [32, 2, 3])
    best, worst = -np.arange(labels.size, dtype=float), np.arange(labels.size, dtype=float)
    results = [ndcg_arrays(qid, labels, s, np.arange(labels.size), ks=(1, 10)) for s in (best, worst)]
    for res in results:
        assert res.excluded.tolist() == [1] and np.isnan(res.per_query[10][1])
        assert all(res.valid(k).shape == (2,) and np.isfinite(res.valid(k)).all() for k in (1, 10))
    assert results[0].valid(10).tolist() == pytest.approx([1.0, _dcg([2, 0, 1]) / _dcg([2, 1, 0])])
    worst_q0 = _dcg([0, 0] + [MAX_GRADE] * 8) / _dcg([MAX_GRADE] * 10)  # its two zeros ranked first
    assert results[1].valid(10).tolist() == pytest.approx([worst_q0, _dcg([1, 0, 2]) / _dcg([2, 1, 0])])


def test_parity_with_ranx_ndcg_burges_on_the_real_dev_set(settings) -> None:
    """Our vectorised NDCG equals ranx's ndcg_burges@k to 1e-9 per query (the slowest test: numba)."""
    from ranx import Qrels, Run, evaluate

    judged = load_judged_set(settings.dev_judgments)
    qrels: dict[str, dict[str, int]] = {}
    for q, d, label in zip(judged.qid.tolist(), judged.doc_id, judged.label.tolist()):
        qrels.setdefault(f"q{q:05d}", {})[d] = label
    rng = np.random.default_rng(3)
    continuous = rng.random(len(judged))
    coarse = rng.integers(0, 3, len(judged)).astype(float)  # many ties: resolved by our doc-id rule
    for scores in (continuous, coarse):
        ours = ndcg(judged, scores)
        # hand ranx our exact order as strictly decreasing scores so that its tie handling plays no part
        order = np.lexsort((judged.tie_rank, -scores, judged.qid))
        strict = np.empty(len(judged))
        strict[order] = -np.arange(len(judged), dtype=float)
        run: dict[str, dict[str, float]] = {}
        for q, d, s in zip(judged.qid.tolist(), judged.doc_id, strict.tolist()):
            run.setdefault(f"q{q:05d}", {})[d] = s
        metrics = [f"ndcg_burges@{k}" for k in (1, 3, 10)]
        theirs = evaluate(Qrels(qrels), Run(run), metrics, return_mean=False, make_comparable=True)
        for k in (1, 3, 10):
            np.testing.assert_allclose(ours.per_query[k], theirs[f"ndcg_burges@{k}"], rtol=0, atol=1e-9)
    assert ours.excluded.size == 0  # every dev query has a positive grade (data README)
