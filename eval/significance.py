"""Paired significance of per-query NDCG differences: t-test (scipy) and a bootstrap CI."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from pipeline.core.defaults import SEED

ALPHA = 0.05


@dataclass(frozen=True)
class PairedTest:
    """Comparison of system A against system B over the same queries (A - B)."""

    n: int
    mean_diff: float
    t_stat: float
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float

    def significant(self, alpha: float = ALPHA) -> bool:
        """True when the two-sided paired t-test rejects equal means at ``alpha``."""
        return self.p_value < alpha


def _paired_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples need equal 1-d shapes, got {a.shape} and {b.shape}")
    if a.size < 2:
        raise ValueError("a paired test needs at least 2 queries")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired samples must be finite (a NaN query would be dropped or poison the mean)")
    return a - b


def paired_ttest(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of scipy's paired t-test; identical samples give (0.0, 1.0)."""
    diff = _paired_diff(a, b)
    if not diff.any():
        return 0.0, 1.0
    result = stats.ttest_rel(a, b)
    return float(result.statistic), float(result.pvalue)


def bootstrap_ci(
    a: np.ndarray, b: np.ndarray, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean paired difference ``a - b`` (queries resampled)."""
    diff = _paired_diff(a, b)
    if np.ptp(diff) == 0:
        return float(diff[0]), float(diff[0])
    res = stats.bootstrap(
        (diff,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        batch=1000,
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def compare_paired(
    a: np.ndarray, b: np.ndarray, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = SEED
) -> PairedTest:
    """Paired t-test and bootstrap CI of ``a - b`` in one record."""
    diff = _paired_diff(a, b)
    t_stat, p_value = paired_ttest(a, b)
    low, high = bootstrap_ci(a, b, confidence, n_resamples, seed)
    return PairedTest(
        n=int(diff.size),
        mean_diff=float(diff.mean()),
        t_stat=t_stat,
        p_value=p_value,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
    )
