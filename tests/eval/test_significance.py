"""Paired t-test and bootstrap CI over per-query NDCG."""
from __future__ import annotations

import math

import numpy as np
import pytest

from eval.significance import bootstrap_ci, compare_paired, paired_ttest


def test_ttest_matches_the_textbook_formula() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(40)
    b = a - 0.05 + rng.normal(0, 0.1, 40)
    d = a - b
    t_expected = d.mean() / (d.std(ddof=1) / math.sqrt(d.size))
    t, p = paired_ttest(a, b)
    assert t == pytest.approx(t_expected)
    assert 0 < p < 1


def test_identical_systems_are_not_significant() -> None:
    a = np.linspace(0, 1, 25)
    test = compare_paired(a, a.copy())
    assert (test.t_stat, test.p_value, test.ci_low, test.ci_high) == (0.0, 1.0, 0.0, 0.0)
    assert not test.significant()


def test_a_clear_improvement_is_significant_with_ci_above_zero() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(200)
    better = np.clip(base + 0.05 + rng.normal(0, 0.05, 200), 0, 1)
    test = compare_paired(better, base)
    assert test.significant() and test.p_value < 1e-6
    assert 0 < test.ci_low < test.mean_diff < test.ci_high


def test_noise_only_is_usually_not_significant_and_ci_covers_zero() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.random(100), rng.random(100)
    test = compare_paired(a, b)
    assert test.ci_low < 0 < test.ci_high
    assert not test.significant()


def test_bootstrap_is_seeded_and_narrows_with_more_queries() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random(400), rng.random(400)
    assert bootstrap_ci(a, b, seed=9) == bootstrap_ci(a, b, seed=9)
    small = bootstrap_ci(a[:50], b[:50], seed=9)
    large = bootstrap_ci(a, b, seed=9)
    assert (large[1] - large[0]) < (small[1] - small[0])


def test_unpaired_shapes_are_rejected() -> None:
    with pytest.raises(ValueError, match="equal"):
        compare_paired(np.zeros(3), np.zeros(4))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_per_query_values_are_rejected_not_averaged(bad: float) -> None:
    a, b = np.array([0.5, bad, 0.7, 0.9]), np.array([0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="finite"):
        compare_paired(a, b)
