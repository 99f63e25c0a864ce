"""The store cache of slow-to-fit baselines (and of a model's vectors): arrays keyed by a hash of inputs and settings.

Re-running a comparison skips the fit: doc2vec, PLSA and skip-thought keep what they fitted here,
and :class:`~eval.model_scorer.ModelScorer` keeps a model's vectors, keyed by its weights and texts.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any, Sequence

import numpy as np

from pipeline.storage.store import Store
from pipeline.storage.locations import working

CACHE_PREFIX = working("cache/baselines")


def text_digest(texts: Sequence[str]) -> str:
    """SHA-256 of a sequence of texts (order-sensitive)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()


class FitCache:
    """Fitted arrays of one baseline in the store under ``cache/baselines/<name>/<key>/``."""

    def __init__(self, store: Store, name: str, payload: dict[str, Any]) -> None:
        blob = json.dumps(payload, sort_keys=True, default=str).encode("utf-8")
        self.key = hashlib.sha256(blob).hexdigest()[:20]
        self.prefix = f"{CACHE_PREFIX}/{name}/{self.key}"
        self.store = store

    def load(self) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """(arrays, meta) of an earlier fit, or None. ``meta.json`` is written last."""
        if not self.store.exists(f"{self.prefix}/meta.json"):
            return None
        meta = self.store.read_json(f"{self.prefix}/meta.json")
        with np.load(io.BytesIO(self.store.read_bytes(f"{self.prefix}/arrays.npz"))) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return arrays, meta

    def save(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> str:
        """Store the arrays then the metadata; returns the cache folder's URI."""
        sink = io.BytesIO()
        np.savez(sink, **arrays)
        self.store.write_bytes(f"{self.prefix}/arrays.npz", sink.getvalue())
        self.store.write_json(f"{self.prefix}/meta.json", meta)
        return self.store.uri(self.prefix)
