"""A trained model as a text encoder: texts in, one vector per text from the query or the document tower.

:func:`encoders.model.loading.load_encoder` builds one from a logged model.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from encoders.towers.batch import MixedBatch, SentenceBatch, TextBatch
from encoders.towers.text_batches import texts_to_batch
from encoders.towers.tower_catalog import tower_spec
from pipeline.core.errors import ConfigError
from pipeline.core.textnorm import normalize
from pipeline.features.text_arrays import split_words
from pipeline.features.trigram import TrigramVocab

#: Texts per batch through a transformer tower (the sentence-transformers default is 32; larger batches of
#: like-length texts are as fast on CPU).
TEXT_BATCH = 128


class TextEncoder:
    """A trained two-tower model that turns texts into vectors (cosine of them ranks titles)."""

    def __init__(self, model: Any, vocab: TrigramVocab, max_words: int | None = None, run_id: str = "",
                 model_uri: str = "", device: torch.device | None = None,
                 training: dict[str, Any] | None = None) -> None:
        self.device = device or torch.device("cpu")
        self.model = model.to(self.device).eval()
        self.vocab, self.max_words, self.run_id, self.model_uri = vocab, max_words, run_id, model_uri
        self.label: str = model.name  # display name, e.g. "LSTM-RNN (ncell=96)"
        self.model_type: str = model.model_type
        self.config: dict[str, Any] = dict(model.config)
        self.param_count: int = model.param_counts()["total"]
        self.dim: int = model.out_dim
        self.training: dict[str, Any] = dict(training or {})  # n and gamma of the training run
        self.inputs = tower_spec(self.model_type).inputs  # trigrams, text or both

    @torch.no_grad()
    def encode(self, texts: list[str], side: str, batch_size: int = 1024) -> np.ndarray:
        """``(N, d)`` float32 vectors of ``texts`` (normalised here) from the ``query`` or ``doc`` tower."""
        if side not in ("query", "doc"):
            raise ConfigError(f"side must be 'query' or 'doc', got {side!r}")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        texts = [normalize(t) for t in texts]
        known = (None if self.inputs == "text"
                 else self.vocab.word_bags(pc.unique(split_words(pa.array(texts, pa.string()))[0])))
        order, step = np.arange(len(texts)), batch_size
        if self.inputs != "trigrams":  # a transformer pads to the longest text of a batch: batch texts of like length
            order, step = np.argsort([-len(t) for t in texts], kind="stable"), min(batch_size, TEXT_BATCH)
        for start in range(0, len(texts), step):
            rows = order[start : start + step]
            out[rows] = self.model.embed(self._batch([texts[i] for i in rows], known), side).float().cpu().numpy()
        return out

    def _batch(self, texts: list[str], known: Any) -> TextBatch | SentenceBatch | MixedBatch:
        """What the model's towers read: the texts, their trigram bags, or both."""
        if self.inputs == "text":
            return TextBatch(texts)
        hashed = texts_to_batch(texts, self.vocab, self.max_words, known, normalized=True).to(self.device)
        return hashed if self.inputs == "trigrams" else MixedBatch(TextBatch(texts), hashed)


