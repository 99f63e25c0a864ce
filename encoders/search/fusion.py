"""Score fusion of BM25 and a trained model within each query's candidate list.

* Linear: each scorer normalised within a query's list (min-max by default, z-score, or none), then
  ``w * model + (1 - w) * bm25``; ``w`` is chosen by :func:`fit_linear_weight` on held-out *click*
  lists (the clicked title among its negatives), by MRR, never on a judged set.
* Reciprocal-rank fusion (Cormack et al. 2009): ``sum over scorers of 1 / (k + rank)``, k = 60,
  ranks 1-based within the list, tied scores sharing the best rank (so ties survive fusion).

Groups are integer ids, one per candidate list (``group[i]`` = list of row i).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

NORMALISATIONS = ("zscore", "minmax", "none")
RRF_K = 60
#: the weights tried by every linear fusion (the ``linear`` baseline and the served ``linear`` mode), 0 (BM25 alone)
#: to 1 (the model alone) in steps of 0.05
WEIGHT_GRID = tuple(round(0.05 * i, 2) for i in range(21))


def _by_group(values: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group count, sum and sum of squares (group ids 0..G-1)."""
    size = int(group.max()) + 1 if group.size else 0
    return (np.bincount(group, minlength=size).astype(np.float64), np.bincount(group, values, size),
            np.bincount(group, values * values, size))


def normalise(scores: np.ndarray, group: np.ndarray, method: str = "zscore") -> np.ndarray:
    """Scores rescaled within each group: z-score or min-max (a constant group becomes all zeros), or as they are."""
    scores, group = np.asarray(scores, dtype=np.float64), np.asarray(group, dtype=np.int64)
    if method == "none":
        return scores
    if method == "zscore":
        count, total, squares = _by_group(scores, group)
        mean = total / np.maximum(count, 1)
        std = np.sqrt(np.maximum(squares / np.maximum(count, 1) - mean * mean, 0.0))
        centred = scores - mean[group]
        return np.where(std[group] > 1e-12, centred / np.where(std > 1e-12, std, 1.0)[group], 0.0)
    if method == "minmax":
        size = int(group.max()) + 1 if group.size else 0
        low = np.full(size, np.inf)
        high = np.full(size, -np.inf)
        np.minimum.at(low, group, scores)
        np.maximum.at(high, group, scores)
        span = (high - low)[group]
        return np.where(span > 1e-12, (scores - low[group]) / np.where(span > 1e-12, span, 1.0), 0.0)
    raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {method!r}")


def linear_fusion(model: np.ndarray, bm25: np.ndarray, group: np.ndarray, weight: float,
                  method: str = "minmax") -> np.ndarray:
    """``weight * model + (1 - weight) * bm25`` after normalising each within its group."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    return weight * normalise(model, group, method) + (1.0 - weight) * normalise(bm25, group, method)


def group_ranks(scores: np.ndarray, group: np.ndarray) -> np.ndarray:
    """1-based rank of each score in its group, highest first; tied scores share the best (smallest) rank."""
    scores, group = np.asarray(scores, dtype=np.float64), np.asarray(group, dtype=np.int64)
    ranks = np.empty(scores.size, dtype=np.int64)
    order = np.lexsort((-scores, group))
    for members in np.split(order, np.flatnonzero(np.diff(group[order])) + 1):
        if members.size:
            ordered = scores[members]
            ranks[members] = np.searchsorted(-ordered, -ordered, side="left") + 1
    return ranks


def reciprocal_rank_fusion(score_lists: Sequence[np.ndarray], group: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """RRF score ``sum_s 1 / (k + rank_s)`` of each row within its group."""
    return sum(1.0 / (k + group_ranks(s, group)) for s in score_lists)  # type: ignore[return-value]


def fuse_ranked(ranked: Sequence[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of ranked lists of ids (best first): (id, sum of 1 / (k + rank)) best first; an id
    missing from a list gets nothing from it; equal scores go by ascending id."""
    fused: dict[int, float] = {}
    for ids in ranked:
        for rank, item in enumerate(ids, 1):
            fused[int(item)] = fused.get(int(item), 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


def click_mrr(scores: np.ndarray, group: np.ndarray, clicked: np.ndarray) -> dict[str, float]:
    """MRR and hit@1 of the clicked row of each group; ties count against it (as in training's validation)."""
    scores, group = np.asarray(scores, dtype=np.float64), np.asarray(group, dtype=np.int64)
    clicked_score = np.zeros(int(group.max()) + 1 if group.size else 0)
    clicked_score[group[clicked]] = scores[clicked]
    beaten = (scores >= clicked_score[group]) & ~clicked
    rank = 1 + np.bincount(group, beaten.astype(np.float64), clicked_score.size)
    if rank.size == 0:
        return {"mrr": 0.0, "hit@1": 0.0}
    return {"mrr": float(np.mean(1.0 / rank)), "hit@1": float(np.mean(rank == 1))}


@dataclass(frozen=True)
class WeightFit:
    """The chosen weight and the click MRR of every weight tried."""

    weight: float
    mrr: float
    curve: dict[float, float]


def fit_linear_weight(model: np.ndarray, bm25: np.ndarray, group: np.ndarray, clicked: np.ndarray,
                      method: str = "minmax", grid: Sequence[float] = WEIGHT_GRID) -> WeightFit:
    """The grid weight with the best click MRR (the smallest such weight on ties): held-out click lists only."""
    curve = {float(w): click_mrr(linear_fusion(model, bm25, group, float(w), method), group, clicked)["mrr"]
             for w in grid}
    best = max(curve.values())
    weight = min(w for w, value in curve.items() if value == best)
    return WeightFit(weight, best, curve)
