"""NDCG@k as fixed in the data README, vectorised over all queries of a judged set.

Gain ``2^grade - 1`` (ranx ``ndcg_burges``), discount ``1 / log2(1 + rank)``, ideal ordering
from every judged title of the query. Each query's titles are ranked by descending score,
ties broken by ascending document id (``JudgedSet.tie_rank``), never by label. Grades must lie
in 0..``MAX_GRADE`` so that every gain and discounted sum is finite. A query without any
positive grade has no ideal gain (NDCG 0/0): it is NaN per query and excluded from means and
paired tests, for every system alike. ranx scores such a query 0.0 and averages it in; on
every other query our values equal ranx's ``ndcg_burges@k``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval.judgments import MAX_GRADE, JudgedSet
from pipeline.core.errors import DeepsentError

KS = (1, 3, 10)
GAIN_NAME = "exponential gain 2^grade - 1, log2 discount (ranx ndcg_burges)"


@dataclass(frozen=True)
class NdcgResult:
    """Per-query NDCG (NaN for excluded queries) for each cutoff, and the excluded queries."""

    per_query: dict[int, np.ndarray]
    excluded: np.ndarray

    def mean(self, k: int) -> float:
        """Mean NDCG@k over the queries that have a positive grade."""
        values = self.valid(k)
        return float(values.mean()) if values.size else float("nan")

    def valid(self, k: int) -> np.ndarray:
        """NDCG@k of the evaluated queries in query order: the same queries for every system (paired tests)."""
        keep = np.ones(self.per_query[k].shape, dtype=bool)
        keep[self.excluded] = False
        return self.per_query[k][keep]


def _positions(qid: np.ndarray, order: np.ndarray, num_queries: int) -> np.ndarray:
    """0-based rank within its query of each entry of ``order`` (entries sorted by query)."""
    counts = np.bincount(qid, minlength=num_queries)
    starts = np.cumsum(counts) - counts
    return np.arange(order.shape[0]) - starts[qid[order]]


def _dcg(qid: np.ndarray, gain: np.ndarray, order: np.ndarray, k: int, num_queries: int) -> np.ndarray:
    rank = _positions(qid, order, num_queries)
    contrib = np.where(rank < k, gain[order] / np.log2(rank + 2.0), 0.0)
    return np.bincount(qid[order], weights=contrib, minlength=num_queries)


def ndcg_arrays(
    qid: np.ndarray,
    labels: np.ndarray,
    scores: np.ndarray,
    tie_rank: np.ndarray,
    ks: tuple[int, ...] = KS,
) -> NdcgResult:
    """NDCG@k per query from flat arrays (one entry per judged pair, ``qid`` in 0..Q-1)."""
    qid = np.asarray(qid, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if not (qid.shape == labels.shape == scores.shape == np.shape(tie_rank)):
        raise DeepsentError(f"NDCG inputs disagree in length: {qid.shape}, {labels.shape}, {scores.shape}")
    if not np.isfinite(scores).all():
        raise DeepsentError(f"{int((~np.isfinite(scores)).sum())} scores are NaN or infinite")
    outside = (labels < 0) | (labels > MAX_GRADE)
    if outside.any():
        raise DeepsentError(f"{int(outside.sum())} labels outside the grades 0..{MAX_GRADE}, e.g. {int(labels[outside][0])}")
    num_queries = int(qid.max()) + 1 if qid.size else 0
    gain = np.exp2(labels.astype(np.float64)) - 1.0
    graded = np.bincount(qid, weights=(labels > 0).astype(np.float64), minlength=num_queries) > 0
    ranked = np.lexsort((tie_rank, -scores, qid))
    ideal = np.lexsort((-labels, qid))
    per_query: dict[int, np.ndarray] = {}
    for k in ks:
        idcg = _dcg(qid, gain, ideal, k, num_queries)
        dcg = _dcg(qid, gain, ranked, k, num_queries)
        per_query[k] = np.where(graded, dcg / np.where(graded, idcg, 1.0), np.nan)
    return NdcgResult(per_query=per_query, excluded=np.flatnonzero(~graded))


def ndcg(judged: JudgedSet, scores: np.ndarray, ks: tuple[int, ...] = KS) -> NdcgResult:
    """NDCG@k per query of ``judged`` re-ranked by ``scores`` (aligned with its pairs)."""
    return ndcg_arrays(judged.qid, judged.label, scores, judged.tie_rank, ks)
