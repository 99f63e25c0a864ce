"""ULM: Dirichlet-smoothed query likelihood computed by hand on a tiny collection."""
from __future__ import annotations

import math

import numpy as np
import pytest

from eval.baselines.ulm import ULMScorer, Vocabulary, collection_model

TITLES = ["red drill", "blue saw saw", "red saw"]


def test_collection_model_is_add_one_smoothed_with_an_unknown_slot() -> None:
    vocab = Vocabulary.from_texts(TITLES)
    p = collection_model(vocab, TITLES)
    # words: red(2) drill(1) blue(1) saw(3) + unknown(0); 7 tokens, 5 slots
    np.testing.assert_allclose(p, np.array([3, 2, 2, 4, 1]) / 12)
    assert p.sum() == pytest.approx(1.0)


def test_scores_by_hand() -> None:
    mu = 2.0
    scorer = ULMScorer(mu=mu)
    scorer.fit_corpus(TITLES)
    p = {"red": 3 / 12, "drill": 2 / 12, "blue": 2 / 12, "saw": 4 / 12, "unk": 1 / 12}
    got = scorer.score(["red saw", "red saw", "saw saw", "laser"], ["red saw", "blue saw saw", "blue saw saw", "red drill"])
    expected = [
        math.log((1 + mu * p["red"]) / (2 + mu)) + math.log((1 + mu * p["saw"]) / (2 + mu)),
        math.log((0 + mu * p["red"]) / (3 + mu)) + math.log((2 + mu * p["saw"]) / (3 + mu)),
        2 * math.log((2 + mu * p["saw"]) / (3 + mu)),  # a repeated query word counts twice
        math.log(mu * p["unk"] / (2 + mu)),  # a word unseen in the collection: finite, not log 0
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_matching_title_ranks_first_and_mu_is_a_parameter() -> None:
    for mu in (1.0, 50.0, 2000.0):
        scorer = ULMScorer(mu=mu)
        scorer.fit_corpus(TITLES)
        scores = scorer.score(["red drill"] * 3, TITLES)
        assert int(np.argmax(scores)) == 0
        assert f"mu={mu:g}" in scorer.describe()["settings"]
