"""A model's vectors are kept in the store's cache, keyed by its weights and the texts."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from encoders.model.loading import load_encoder
from encoders.training.results import TrainResult
from eval.baselines.base import FitContext
from eval.model_scorer import ModelScorer
from pipeline.core.config import Settings
from pipeline.core.store import Store

QUERIES = ["cordless drill", "led bulb", "cordless drill"]
TITLES = ["20v cordless drill kit", "60w led bulb", "garden hose"]


def test_the_second_scoring_reads_the_cache_and_new_weights_miss_it(trained_run: tuple[Settings, TrainResult],
                                                                     tmp_path: Path) -> None:
    base, result = trained_run
    settings = dataclasses.replace(base, store=str(tmp_path / "store"))  # an empty cache
    encoded: list[int] = []
    perturb = {"on": False}

    def loader(uri: str, s: Settings):  # type: ignore[no-untyped-def]
        encoder = load_encoder(uri, s)
        if perturb["on"]:
            with torch.no_grad():
                next(encoder.model.parameters()).add_(0.5)
        plain = encoder.encode
        encoder.encode = lambda texts, side: (encoded.append(len(texts)), plain(texts, side))[1]  # type: ignore[method-assign]
        return encoder

    ctx = FitContext(settings=settings, store=Store.from_settings(settings), train_titles=[], train_queries=[],
                     test_titles=TITLES, test_queries=QUERIES)
    scores = []
    for _ in range(2):
        scorer = ModelScorer(result.model_uri, loader)
        scorer.fit(ctx)
        scores.append(scorer.score(QUERIES, TITLES))
    assert encoded == [2, 3] and np.array_equal(scores[0], scores[1])  # unique queries and titles, encoded once
    perturb["on"] = True
    scorer = ModelScorer(result.model_uri, loader)
    scorer.fit(ctx)
    changed = scorer.score(QUERIES, TITLES)
    assert encoded == [2, 3, 2, 3] and not np.allclose(changed, scores[0])
