"""doc2vec (gensim Doc2Vec, PV-DM) trained as in the paper, cosine of the sentence vectors.

The paper trains on the train and test text with min-count 1, window 5, size 100, sample
1e-4, negative 5, 30 epochs and scores a pair by the cosine of the query's and the title's
paragraph vectors. Every distinct sentence (query or title) is one tagged document.
Determinism: with ``workers=1`` gensim's training draws only from its own generator seeded
by ``seed`` (weights from ``numpy.random.default_rng(seed)``), so vectors do not depend on
PYTHONHASHSEED; only ``infer_vector`` (a sentence never trained on) seeds from Python's
``hash`` and is therefore reproducible only with a fixed PYTHONHASHSEED.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import cosine_pair_scores
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from eval.baselines.fit_cache import FitCache, text_digest
from pipeline.core import validators as v

log = logging.getLogger(__name__)


def training_sentences(ctx: FitContext) -> list[str]:
    """Distinct non-empty sentences of train and test text (queries and titles), first-seen order."""
    texts = list(ctx.train_queries) + list(ctx.train_titles) + list(ctx.test_queries) + list(ctx.test_titles)
    return list(dict.fromkeys(t for t in texts if t.split()))


#: The quick main job trains 10 epochs (~40 s on 2 cores) instead of 30 (~2 min); ``full`` keeps the 30.
SPEC = BaselineSpec(name="doc2vec", label="Doc2Vec", cls="Doc2VecScorer", order=4, profiles={"quick": "epochs=10"})


class Doc2VecScorer:
    """Paragraph vectors (Le & Mikolov 2014) with the paper's gensim parameters."""

    name = "doc2vec"
    OPTIONS = {"vector_size": v.positive_int, "window": v.positive_int, "min_count": v.positive_int,
               "sample": v.non_negative_float, "negative": v.positive_int, "epochs": v.positive_int,
               "dm": v.choice("0", "1"), "workers": v.positive_int}

    def __init__(
        self,
        vector_size: int = 100,
        window: int = 5,
        min_count: int = 1,
        sample: float = 1e-4,
        negative: int = 5,
        epochs: int = 30,
        dm: int = 1,
        workers: int = 1,
    ) -> None:
        self.params = {
            "vector_size": int(vector_size),
            "window": int(window),
            "min_count": int(min_count),
            "sample": float(sample),
            "negative": int(negative),
            "epochs": int(epochs),
            "dm": int(dm),
        }
        self.workers = int(workers)
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._row: dict[str, int] = {}
        self._model: Any = None
        self._num_params = 0
        self._fit_seconds = 0.0
        self.cached = False

    def fit(self, ctx: FitContext) -> None:
        """Train on every distinct sentence (or load the vectors of the same training from the store)."""
        sentences = training_sentences(ctx)
        self._row = {s: i for i, s in enumerate(sentences)}
        deterministic = self.workers == 1
        payload = {"sentences": text_digest(sentences), "seed": ctx.seed, **self.params, "version": 1}
        cache = FitCache(ctx.store, "doc2vec", payload) if deterministic else None
        hit = cache.load() if cache else None
        if hit is not None:
            arrays, meta = hit
            self._vectors, self._num_params = arrays["vectors"], int(meta["params"])
            self._fit_seconds, self.cached = float(meta["fit_seconds"]), True
            return
        start = time.perf_counter()
        self._model = self._train(sentences, ctx.seed)
        self._vectors = np.asarray(self._model.dv.vectors, dtype=np.float32)
        self._fit_seconds = time.perf_counter() - start
        wv = self._model.wv
        self._num_params = int(wv.vectors.size + self._model.syn1neg.size + self._vectors.size)
        log.info("doc2vec: %d sentences, %d words, %.1f s", len(sentences), len(wv), self._fit_seconds)
        if cache:
            cache.save({"vectors": self._vectors}, {"fit_seconds": self._fit_seconds, "params": self._num_params})

    def _train(self, sentences: list[str], seed: int) -> Any:
        from gensim.models.doc2vec import Doc2Vec, TaggedDocument

        logging.getLogger("gensim").setLevel(logging.WARNING)  # per-epoch INFO lines would flood stderr
        docs = [TaggedDocument(s.split(), [i]) for i, s in enumerate(sentences)]
        return Doc2Vec(documents=docs, workers=self.workers, seed=seed, **self.params)

    def _encode(self, texts: list[str], side: str) -> np.ndarray:
        missing = [t for t in texts if t not in self._row]
        if missing and self._model is None:
            raise RuntimeError(f"doc2vec: {len(missing)} sentences were not in training (e.g. {missing[0]!r}) and the model was loaded from cache")
        return np.stack(
            [self._vectors[self._row[t]] if t in self._row else self._model.infer_vector(t.split()) for t in texts]
        )

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """Cosine of the paragraph vectors of each (query, title) pair."""
        return cosine_pair_scores(self._encode, queries, titles)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        p = self.params
        mode = "PV-DM" if p["dm"] else "PV-DBOW"
        return {
            "settings": f"{mode}, size={p['vector_size']}, window={p['window']}, sample={p['sample']:g}, negative={p['negative']}, epochs={p['epochs']}",
            "params": self._num_params,
            "fit_seconds": self._fit_seconds,
            "cached": self.cached,
        }
