"""The MiniLM baseline of ``compare`` reads and writes the store's vectors, keyed like every other encoder (the
ensemble's off-the-shelf half has the same key), encodes a text once per store, and says how a long encode goes."""
from __future__ import annotations

import logging
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from encoders.model import text_encoder, vector_store
from encoders.model.text_encoder import part_key
from encoders.training.ensemble_build import _text_part
from eval.baselines.base import FitContext
from eval.baselines.minilm import MiniLMScorer
from pipeline.core.config import Settings
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store

TITLES = ["cordless drill", "20v max lithium ion cordless drill kit", "60w led bulb", "garden hose 50 ft",
          "toilet flapper", "1/2 in. x 10 ft. copper pipe type l", "stainless steel kitchen sink"]
QUERIES = ["drill", "led light bulb", "hose"]


def _fitted(settings: Settings) -> MiniLMScorer:
    scorer = MiniLMScorer()
    store = Store.from_settings(settings)
    scorer.fit(FitContext(settings, store, [], [], [], QUERIES))
    return scorer


@pytest.mark.heavy  # over 10 s: left out of make check
def test_the_minilm_baseline_encodes_each_text_once_per_store_under_the_ensembles_key(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    encoded: Counter = Counter()
    monkeypatch.setattr(text_encoder, "ENCODE_LOG", encoded)
    monkeypatch.setattr(vector_store, "QUIET_BELOW", 1)  # a long encode, in small: its progress lines show
    monkeypatch.setattr(vector_store, "PROGRESS_EVERY_S", 0.0)
    caplog.set_level(logging.INFO, logger="encoders.model.vector_store")
    first = _fitted(settings)
    scores = first.score(QUERIES * 2, TITLES[:6])
    assert {side for _, side, _ in encoded} == {"query", "doc"} and max(encoded.values()) == 1
    assert any("texts/s" in r.getMessage() and "MiniLM-L6 off-the-shelf" in r.getMessage() for r in caplog.records)

    ensemble_half = _text_part(settings, None, SimpleNamespace(vocab=TrigramVocab.from_counts({}), max_words=None,
                                                               device=torch.device("cpu")))
    key = part_key(ensemble_half.parts("doc")[0], ensemble_half)
    assert {k for k, _, _ in encoded} == {key}  # the ensemble's off-the-shelf half reads these vectors
    assert Store.from_settings(settings).list_files(f"{vector_store.VECTORS_ROOT}/{key}", ".json")

    before = sum(encoded.values())
    again = _fitted(settings)  # a later comparison: every text is read from the store
    np.testing.assert_array_equal(again.score(QUERIES * 2, TITLES[:6]), scores)
    np.testing.assert_array_equal(again.encode(TITLES, "doc")[:6], first.encode(TITLES[:6], "doc"))
    assert sum(encoded.values()) == before + 1  # only the one new title was encoded
    assert again.describe()["params"] > 0
