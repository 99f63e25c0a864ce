"""The gate's served-search rule: NDCG of a ranked list of clicked titles, and a refusal when search got worse."""
from __future__ import annotations

import numpy as np
import pytest

from encoders.search.served import query_ndcg
from eval.promotion.gate import ServedFigures, decide
from eval.metrics import KS, NdcgResult


def test_served_ndcg_by_hand() -> None:
    assert query_ndcg(["a", "b", "c"], {"a": 1.0}) == 1.0
    assert query_ndcg(["x", "a"], {"a": 1.0}) == pytest.approx(1 / np.log2(3))
    # two clicked titles, one found at rank 3: DCG 1/log2(4) over the ideal 1 + 1/log2(3)
    assert query_ndcg(["x", "y", "a"], {"a": 1.0, "b": 1.0}) == pytest.approx(0.5 / (1 + 1 / np.log2(3)))
    assert query_ndcg(["x"] * 10 + ["a"], {"a": 1.0}) == 0.0  # beyond the cutoff
    # graded gains (a judged gate set): the better title first is the ideal order
    assert query_ndcg(["b", "a"], {"a": 1.0, "b": 7.0}) == 1.0
    assert query_ndcg(["a", "b"], {"a": 1.0, "b": 7.0}) == pytest.approx((1 + 7 / np.log2(3)) / (7 + 1 / np.log2(3)))


def _ndcg(values: np.ndarray) -> NdcgResult:
    return NdcgResult(per_query={k: values.copy() for k in KS}, excluded=np.array([], dtype=np.int64))


def _served(ndcg: np.ndarray) -> ServedFigures:
    return ServedFigures("linear", 0.6, 5000, recall=ndcg.copy(), ndcg=ndcg)


def test_a_challenger_better_at_re_ranking_but_worse_in_served_search_is_refused() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, 200)
    better, worse_search = _ndcg(base + 0.05), _served(base - 0.2)
    refused = decide(better, _ndcg(base), served=[worse_search, _served(base)])
    assert not refused.promote and "served NDCG@10" in refused.reason and refused.served["p_value"] < 0.05
    assert refused.served["challenger"]["ndcg@10"] < refused.served["champion"]["ndcg@10"]
    promoted = decide(better, _ndcg(base), served=[_served(base), _served(base)])
    assert promoted.promote and "served" in promoted.reason and promoted.served["challenger"]["mode"] == "linear"
    assert decide(better, _ndcg(base)).promote  # without held-out clicks the re-ranking rule alone decides
