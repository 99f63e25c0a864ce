"""doc2vec: trains and scores deterministically at small size, whatever PYTHONHASHSEED, and is cached."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from eval.baselines.base import FitContext
from eval.baselines.doc2vec import Doc2VecScorer, training_sentences
from eval.judgments import load_judged_set
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.storage.store import Store

SMALL = {"vector_size": 16, "epochs": 3}

_FIT_AND_HASH = """
import hashlib, sys
from eval.baselines.base import FitContext
from eval.baselines.doc2vec import Doc2VecScorer
from eval.judgments import load_judged_set
from pipeline.core.config import Settings
from pipeline.storage.store import Store
settings = Settings.from_env(store=sys.argv[1])
judged = load_judged_set(settings.dev_judgments)
titles, queries = list(dict.fromkeys(judged.title))[:400], list(dict.fromkeys(judged.query))[:100]
scorer = Doc2VecScorer(vector_size=16, epochs=3)
scorer.fit(FitContext(settings, Store.from_settings(settings), titles, queries, [], [], seed=5))
print(hashlib.sha256(scorer._vectors.tobytes()).hexdigest())
"""


def _context(settings: Settings) -> FitContext:
    judged = load_judged_set(settings.dev_judgments)
    titles, queries = list(dict.fromkeys(judged.title))[:400], list(dict.fromkeys(judged.query))[:100]
    return FitContext(settings, Store.from_settings(settings), titles, queries, [], [], seed=5)


def test_training_sentences_are_distinct_train_and_test_text(settings) -> None:
    ctx = FitContext(settings, Store.from_settings(settings), ["a b", "c"], ["a b", "q"], ["t"], ["q", " "])
    assert training_sentences(ctx) == ["a b", "q", "c", "t"]


def test_trains_deterministically_and_scores_by_cosine(settings, tmp_path: Path) -> None:
    ctx = _context(settings)
    first, second = Doc2VecScorer(**SMALL), Doc2VecScorer(**SMALL)
    first.fit(ctx)
    ctx_fresh = dataclasses.replace(ctx, store=Store(str(tmp_path / "other-store")))
    second.fit(ctx_fresh)  # a second training, not a cache hit
    assert not first.cached and not second.cached
    np.testing.assert_array_equal(first._vectors, second._vectors)
    queries, titles = ctx.train_queries[:5], ctx.train_titles[:5]
    scores = first.score(queries, titles)
    qv, tv = first._vectors[[first._row[q] for q in queries]], first._vectors[[first._row[t] for t in titles]]
    expected = (qv * tv).sum(1) / np.linalg.norm(qv, axis=1) / np.linalg.norm(tv, axis=1)
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    assert np.all(np.abs(scores) <= 1 + 1e-9)
    assert first.describe()["params"] > 0

    # the same training in a fresh interpreter with another hash seed gives the same vectors
    env = {**os.environ, "PYTHONHASHSEED": "12345", "DEEPSENT_DATA_DIR": str(settings.data_dir)}
    out = subprocess.run(
        [sys.executable, "-c", _FIT_AND_HASH, str(tmp_path / "subprocess-store")],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=True, timeout=120,
    )
    assert out.stdout.strip() == hashlib.sha256(first._vectors.tobytes()).hexdigest()


def test_second_fit_loads_the_cached_vectors(settings) -> None:
    ctx = _context(settings)
    first, second = Doc2VecScorer(**SMALL), Doc2VecScorer(**SMALL)
    first.fit(ctx)
    second.fit(ctx)
    assert second.cached and not first.cached
    np.testing.assert_array_equal(first._vectors, second._vectors)
    pairs = (ctx.train_queries[:3], ctx.train_titles[:3])
    np.testing.assert_array_equal(first.score(*pairs), second.score(*pairs))
    assert second.describe()["fit_seconds"] == first.describe()["fit_seconds"]
