"""NDCG@k as fixed in the data README, vectorised over all queries of a judged set.

Gain ``2^grade - 1`` (ranx ``ndcg_burges``), discount ``1 / log2(1 + rank)``, ideal ordering
from every judged title of the query. Each query's titles are ranked by descending score,
ties broken by ascending document id (``JudgedSet.tie_rank``), never by label. Queries
without any positive grade have no ideal gain: they are reported and excluded from means.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval.judgments import JudgedSet
from pipeline.errors import DeepsentError

KS = (1, 3, 10)
GAIN_NAME = "exponential gain 2^grade - 1, log2 discount (ranx ndcg_burges)"


@dataclass(frozen=True)
class NdcgResult:
    """Per-query NDCG (NaN for excluded queries) for each cutoff, and the excluded queries."""

    per_query: dict[int, np.ndarray]
    excluded: np.ndarray

    def mean(self, k: int) -> float:
        """Mean NDCG@k over the queries that have a positive grade."""
        values = self.per_query[k]
        valid = ~np.isnan(values)
        return float(values[valid].mean()) if valid.any() else float("nan")

    def valid(self, k: int) -> np.ndarray:
        """NDCG@k of the evaluated queries only, in query order (for paired tests)."""
        values = self.per_query[k]
        return values[~np.isnan(values)]


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
    num_queries = int(qid.max()) + 1 if qid.size else 0
    gain = np.exp2(labels.astype(np.float64)) - 1.0
    ranked = np.lexsort((tie_rank, -scores, qid))
    ideal = np.lexsort((-labels, qid))
    per_query: dict[int, np.ndarray] = {}
    for k in ks:
        idcg = _dcg(qid, gain, ideal, k, num_queries)
        dcg = _dcg(qid, gain, ranked, k, num_queries)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_query[k] = np.where(idcg > 0, dcg / np.where(idcg > 0, idcg, 1.0), np.nan)
    excluded = np.flatnonzero(np.bincount(qid, weights=gain, minlength=num_queries) <= 0)
    return NdcgResult(per_query=per_query, excluded=excluded)


def ndcg(judged: JudgedSet, scores: np.ndarray, ks: tuple[int, ...] = KS) -> NdcgResult:
    """NDCG@k per query of ``judged`` re-ranked by ``scores`` (aligned with its pairs)."""
    return ndcg_arrays(judged.qid, judged.label, scores, judged.tie_rank, ks)
