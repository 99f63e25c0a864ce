"""How every decision of the chain tells better from noise: paired margins with a bootstrap CI, and the 1-SE rule.

A decision compares options by a per-query (or per-list) figure measured on the same queries. Two rules, the
same for the ensemble's mix, the ship choice, the promotion gate and the served mode:

- a candidate *beats* its reference only when the paired bootstrap CI of the mean difference (candidate minus
  reference, queries resampled) lies above zero (:func:`paired_margin`, :meth:`Margin.beats`);
- among options within one standard error of the best (the SE of the paired difference to the best), the
  simplest wins (:func:`simplest_near_best`; the caller lists the options simplest first).

Numpy only (the search layer decides the served mode with it); seeded, so a decision is the same on a re-run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pipeline.core.defaults import SEED

#: Bootstrap resamples of a margin's CI, and its confidence.
RESAMPLES, CONFIDENCE = 2000, 0.95


@dataclass(frozen=True)
class Margin:
    """A candidate's mean difference to its reference over ``n`` paired queries, with its bootstrap CI."""

    diff: float
    ci_low: float
    ci_high: float
    n: int

    def beats(self) -> bool:
        """True when the whole CI lies above zero: the candidate is better by more than the noise."""
        return self.ci_low > 0

    def text(self, scale: float = 100.0, unit: str = " points") -> str:
        """``+1.23 points, CI [+0.10, +2.40]`` (figures times ``scale``)."""
        return (f"{self.diff * scale:+.2f}{unit}, CI [{self.ci_low * scale:+.2f}, {self.ci_high * scale:+.2f}] "
                f"over {self.n:,} queries")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"diff": round(self.diff, 6), "ci_low": round(self.ci_low, 6), "ci_high": round(self.ci_high, 6),
                "n": self.n}


def _paired(candidate: np.ndarray, reference: np.ndarray) -> np.ndarray:
    a, b = np.asarray(candidate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"a paired margin needs two 1-d samples of one length >= 2, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a paired margin needs finite figures")
    return a - b


def paired_margin(candidate: np.ndarray, reference: np.ndarray, seed: int = SEED,
                  resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> Margin:
    """The mean of ``candidate - reference`` and its percentile bootstrap CI (queries resampled with replacement)."""
    diff = _paired(candidate, reference)
    rng = np.random.default_rng([seed, diff.size])
    means = np.empty(resamples)
    for start in range(0, resamples, 500):  # 500 resamples at a time: bounded memory for large sets
        rows = rng.integers(0, diff.size, size=(min(500, resamples - start), diff.size))
        means[start:start + rows.shape[0]] = diff[rows].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Margin(float(diff.mean()), float(low), float(high), int(diff.size))


def standard_error(candidate: np.ndarray, reference: np.ndarray) -> float:
    """The standard error of the mean paired difference (0 for identical samples)."""
    diff = _paired(candidate, reference)
    return float(diff.std(ddof=1) / np.sqrt(diff.size))


def simplest_near_best(figures: Sequence[np.ndarray]) -> tuple[int, int]:
    """(the option chosen, the best option): the first of ``figures`` (listed simplest first, each per query over
    the same queries) whose mean is within one standard error of the best's, the SE of their paired difference."""
    means = [float(np.mean(f)) for f in figures]
    best = int(np.argmax(means))  # the first of equal means
    for i, f in enumerate(figures):
        if means[best] - means[i] <= standard_error(figures[best], f):
            return i, best
    return best, best
