"""PLSA: MAP-EM is monotone, fold-in finds a title's topic, scoring follows topics, the fit is cached."""
from __future__ import annotations

import numpy as np
import pytest

from eval.baselines.base import FitContext
from eval.baselines.plsa import PLSAScorer, fit_plsa, fold_in, map_objective
from eval.baselines.ulm import Vocabulary
from pipeline.storage.store import Store

POWER = ["cordless drill battery", "drill bit set", "impact driver battery", "cordless impact drill"]
GARDEN = ["garden hose reel", "hose nozzle spray", "garden spray nozzle", "expandable garden hose"]


def _context(settings, titles: list[str]) -> FitContext:
    return FitContext(settings, Store.from_settings(settings), titles, [], [], [], seed=3)


def test_em_increases_the_map_objective_monotonically(settings) -> None:
    from eval.judgments import load_judged_set

    titles = list(dict.fromkeys(load_judged_set(settings.dev_judgments).title))[:600]
    counts = Vocabulary.from_texts(titles).counts(titles, unknown=False)
    fit = fit_plsa(counts, topics=12, iterations=40, tol=0.0, seed=1)
    obj = np.asarray(fit.objective)
    assert obj.size == 41
    assert np.all(np.diff(obj) > 0), np.diff(obj).min()
    assert obj[-1] == pytest.approx(map_objective(counts, fit.theta, fit.phi, 0.01, 0.1))
    np.testing.assert_allclose(fit.phi.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(fit.theta.sum(axis=1), 1, rtol=1e-5)


def test_fold_in_and_scores_follow_the_topics(settings) -> None:
    scorer = PLSAScorer(topics=2, iterations=200, word_prior=0.001, topic_prior=0.01)
    scorer.fit(_context(settings, POWER * 3 + GARDEN * 3))
    vocab = Vocabulary.from_texts(POWER + GARDEN)
    theta = fold_in(vocab.counts(["battery drill", "hose spray"], unknown=False), scorer._phi)
    assert np.argmax(theta[0]) != np.argmax(theta[1])
    assert theta.max(axis=1).min() > 0.9
    # "impact" never co-occurs with "reel", yet the power-tool title wins on topic alone
    scores = scorer.score(["impact battery"] * 2, ["cordless drill", "hose reel"])
    assert scores[0] > scores[1]
    # an unknown query word adds nothing: ranking and values are those of the known words
    np.testing.assert_allclose(scorer.score(["impact battery zzz"] * 2, ["cordless drill", "hose reel"]), scores)


def test_fit_is_cached_in_the_s3_store_with_its_original_fit_time(s3_settings) -> None:
    first = PLSAScorer(topics=3, iterations=5)
    first.fit(_context(s3_settings, POWER + GARDEN))
    second = PLSAScorer(topics=3, iterations=5)
    second.fit(_context(s3_settings, POWER + GARDEN))
    assert (first.cached, second.cached) == (False, True)
    np.testing.assert_array_equal(first._phi, second._phi)
    assert second.describe()["fit_seconds"] == first.describe()["fit_seconds"]
    assert Store.from_settings(s3_settings).list_files("cache/baselines/plsa")
    other = PLSAScorer(topics=4, iterations=5)
    other.fit(_context(s3_settings, POWER + GARDEN))
    assert not other.cached  # a different setting is a different cache key
