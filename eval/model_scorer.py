"""The scorer of trained models: a model's cosine of query and title vectors, as in the paper.

:class:`ModelScorer` turns a trained model (run id or registry URI, loaded with
``encoders.model.loading.load_encoder``) into a :class:`~eval.baselines.base.Scorer`; the
comparison, the gate and the retrieval table score models with it. Its vectors are read from the
store's vectors of the model's parts (:mod:`encoders.model.vector_store`), keyed by their weights: a
text another stage encoded with the same weights is not encoded again.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from encoders.search.vectors import cosine_pair_scores
from eval.baselines.base import FitContext
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError


class EncodesTexts(Protocol):
    """What this adapter needs of a model: ``encoders.model.text_encoder.TextEncoder`` has it."""

    label: str
    config: dict[str, Any]
    param_count: int
    run_id: str

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """(N, d) float32 vectors of ``texts`` through the ``query`` or ``doc`` tower."""


def _load_encoder(model_uri: str, settings: Settings) -> EncodesTexts:
    from encoders.model.loading import load_encoder  # built by the encoders package; imported lazily

    return load_encoder(model_uri, settings)


def _config_text(config: dict[str, Any], first: Sequence[str] = ()) -> str:
    order = [k for k in first if k in config] + sorted(k for k in config if k not in first)
    return ", ".join(f"{k}={config[k]}" for k in order if not isinstance(config[k], (dict, list)))


class ModelScorer:
    """A trained two-tower model as a scorer: cosine of its query and title vectors."""

    def __init__(self, model_uri: str, loader: Callable[[str, Settings], EncodesTexts] | None = None) -> None:
        self.model_uri = model_uri
        self.name = model_uri
        self._loader = loader or _load_encoder
        self._encoder: EncodesTexts | None = None
        self._load_seconds = 0.0

    def fit(self, ctx: FitContext) -> None:
        """Load the model (training happened in its own MLflow run)."""
        start = time.perf_counter()
        try:
            self._encoder = self._loader(self.model_uri, ctx.settings)
        except DeepsentError:
            raise
        except Exception as exc:  # MLflow/torch errors become one clear line naming the model
            raise DeepsentError(f"model {self.model_uri}: cannot be loaded ({type(exc).__name__}: {exc})") from exc
        self._load_seconds = time.perf_counter() - start
        self.name = self._encoder.label
        from encoders.model.vector_store import stored

        self._encoder = stored(self._encoder, ctx.store)  # a trained model's vectors: read from the store first

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """Cosine of the model's query and title vectors per aligned pair."""
        if self._encoder is None:
            raise RuntimeError("ModelScorer.score() called before fit()")
        return cosine_pair_scores(self._encoder.encode, queries, titles)

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """(N, d) vectors of ``texts`` through the model's ``query`` or ``doc`` tower (kept in the store by part and
        weights, :mod:`encoders.model.vector_store`: the gate, the comparison, the index encode each text once)."""
        if self._encoder is None:
            raise RuntimeError("ModelScorer.encode() called before fit()")
        return self._encoder.encode(texts, side)

    def describe(self) -> dict[str, Any]:
        """Row details: the model's config, parameter count, run id and load time."""
        enc = self._encoder
        return {
            "settings": _config_text({**getattr(enc, "training", {}), **enc.config}, first=("n", "gamma")) if enc else "",
            "params": int(enc.param_count) if enc else None,
            "fit_seconds": self._load_seconds,
            "run_id": enc.run_id if enc else None,
            "model_uri": self.model_uri,
        }


def scorer_labels(scorers: Sequence[Any]) -> list[str]:
    """Each fitted model's label; a label two models share (two runs of one model type) gets its run id's first 8
    characters."""
    labels = [str(scorer.name) for scorer in scorers]
    return [f"{label} (run {str(scorer.describe()['run_id'] or scorer.model_uri)[:8]})" if labels.count(label) > 1
            else label for label, scorer in zip(labels, scorers)]
