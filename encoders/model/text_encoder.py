"""A trained model as a text encoder: texts in, one vector per text from the query or the document tower.

:func:`encoders.model.loading.load_encoder` builds one from a logged model. :meth:`TextEncoder.parts` says what a
side's vectors are made of and :func:`part_key` names each part by its weights: the keys of the store's vectors
(:mod:`encoders.model.vector_store`).
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
import torch.nn.functional as F

from encoders.model.shape_batches import LIVE_ROWS, ROWS, filled, stable_batches, token_bucket, word_counts
from encoders.towers.batch import MixedBatch, SentenceBatch, TextBatch
from encoders.towers.text_batches import texts_to_batch
from encoders.towers.tower_catalog import tower_spec
from pipeline.core.errors import ConfigError
from pipeline.features.text_arrays import split_words
from pipeline.features.trigram import TrigramVocab
from pipeline.text.textnorm import normalize

#: Version of the stored vectors' format and of their key's recipe (:func:`part_key`): a change starts new folders
#: (2: shape-stable batches, :mod:`encoders.model.shape_batches`, and records bound to their key).
VECTORS_FORMAT = 2
#: Tower settings that change training, not what a trained tower computes.
TRAINING_ONLY = ("shared", "in_batch", "init_scale")
#: When set (a Counter), every text a tower encodes counts under (part key, side, text): the tests' view of the work.
ENCODE_LOG: Counter | None = None


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
        for module in self.model.modules():  # the weights are fixed from here: a faster inference runtime may take over
            if hasattr(module, "freeze_for_inference"):
                module.freeze_for_inference()

    def encode(self, texts: list[str], side: str, batch_size: int | None = None) -> np.ndarray:
        """``(N, d)`` float32 vectors of ``texts`` (normalised here) from the ``query`` or ``doc`` tower, ``batch_size``
        texts per forward pass (see :meth:`run_tower`)."""
        return self.run_tower(self.tower(side), self.inputs, texts, batch_size, side=side)

    def encode_live(self, texts: list[str], side: str) -> np.ndarray:
        """``(N, d)`` float32 vectors of live queries: :data:`LIVE_ROWS` texts to every pass, a transformer's word
        pieces padded to their bucket, each part of an ensemble in passes of its own, joined as its tower joins them:
        a text's vector depends on it alone, not on the texts encoded beside it (a server's batch)."""
        parts = self.parts(side)
        return joined([self.run_tower(part.module, part.inputs, texts, LIVE_ROWS, side=side, live=True)
                       for part in parts], parts)

    def tower(self, side: str) -> Any:
        """The ``query`` or ``doc`` tower."""
        if side not in ("query", "doc"):
            raise ConfigError(f"side must be 'query' or 'doc', got {side!r}")
        return self.model.towers()[side]

    def parts(self, side: str) -> list[EncoderPart]:
        """What ``side``'s vectors are made of: its tower, or an ensemble tower's two halves and their weights."""
        tower = self.tower(side)
        if self.model_type != "ensemble":
            return [EncoderPart(tower, self.inputs, None)]
        scales = [float(s) for s in tower.scales]
        return [EncoderPart(tower.trigram_part, "trigrams", scales[0]), EncoderPart(tower.text_part, "text", scales[1])]

    @torch.no_grad()
    def run_tower(self, tower: Any, inputs: str, texts: list[str], batch_size: int | None = None,
                  progress: Callable[[int], None] | None = None, side: str = "", live: bool = False) -> np.ndarray:
        """``(N, d)`` float32 vectors of ``texts`` (normalised here) from ``tower``, which reads ``inputs`` (trigrams,
        text or both), in shape-stable batches of ``batch_size`` texts (default :data:`ROWS` of ``inputs``): a
        text's vector does not depend on the texts beside it. ``progress`` is told the texts done after each batch;
        ``live``: word pieces padded to their :func:`token_bucket`, so texts of other lengths share a batch."""
        out = np.empty((len(texts), tower.out_dim), dtype=np.float32)
        texts = [normalize(t) for t in texts]
        if ENCODE_LOG is not None:
            key = part_key(EncoderPart(tower, inputs, None), self)
            ENCODE_LOG.update((key, side, text) for text in texts)
        known = (None if inputs == "text" else self.vocab.word_bags(pc.unique(split_words(pa.array(texts, pa.string()))[0])))
        rows = batch_size or ROWS[inputs]
        keys = self.shape_keys(tower, inputs, texts, live)
        for positions in stable_batches(keys, rows):
            batch = filled([texts[i] for i in positions], rows)
            shape = keys[positions[0]]  # a live batch's word pieces are padded to the bucket in its key
            tokens = 0 if not live or inputs == "trigrams" else shape if inputs == "text" else shape[1]
            out[positions] = tower(self._batch(batch, known, inputs, tokens))[: len(positions)].float().cpu().numpy()
            if progress is not None:
                progress(len(positions))
        return out

    def shape_keys(self, tower: Any, inputs: str, texts: list[str], live: bool = False) -> list[Any]:
        """Each text's shape key: its words for the trigram part, its word pieces for the text part (``live``: their
        bucket), or both."""
        if not texts:
            return []
        words = word_counts(texts, self.max_words).tolist()
        if inputs == "trigrams":
            return words
        text_tower = tower.text_part if inputs == "both" else tower
        pieces = text_tower.token_counts(texts)
        if live:
            pieces = [token_bucket(count, text_tower.max_tokens) for count in pieces]
        return pieces if inputs == "text" else list(zip(words, pieces))

    def _batch(self, texts: list[str], known: Any, inputs: str,
               tokens: int = 0) -> TextBatch | SentenceBatch | MixedBatch:
        """What a tower reads: the texts (``tokens``: the word pieces they are padded to), their trigram bags, or
        both."""
        if inputs == "text":
            return TextBatch(texts, tokens)
        hashed = texts_to_batch(texts, self.vocab, self.max_words, known, normalized=True).to(self.device)
        return hashed if inputs == "trigrams" else MixedBatch(TextBatch(texts, tokens), hashed)


class EncoderPart(NamedTuple):
    """One set of weights that turns texts into vectors: a tower, or half of an ensemble tower (``scale``: its
    weight in the joined vector, None for a whole tower)."""

    module: Any
    inputs: str
    scale: float | None


def joined(vectors: list[np.ndarray], parts: list[EncoderPart]) -> np.ndarray:
    """The vectors of each of ``parts`` for the same texts joined as their tower joins them (an ensemble's halves:
    unit vectors weighted by their scale, side by side); a whole tower's as they are."""
    if len(parts) == 1 and parts[0].scale is None:
        return vectors[0]
    scaled = [F.normalize(torch.from_numpy(v), dim=-1) * part.scale for v, part in zip(vectors, parts)]
    return torch.cat(scaled, dim=-1).numpy()


def weights_digest(module: Any) -> str:
    """SHA-256 of a torch module's state (names, shapes, values): what its vectors depend on."""
    h = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        values = tensor.detach().cpu().contiguous()
        try:
            h.update(values.numpy().tobytes())
        except TypeError:  # bfloat16 has no numpy type
            h.update(values.float().numpy().tobytes())
    return h.hexdigest()


def part_recipe(part: EncoderPart, encoder: TextEncoder) -> dict[str, Any]:
    """What ``part``'s vectors depend on, as JSON: its class, inputs, settings and weights and, for trigram inputs,
    the vocabulary and word cut that hash its texts. A stored part's record carries it (its key is its hash)."""
    cached = getattr(part.module, "_deepsent_part_recipe", None)
    if cached:
        return cached
    config = {k: v for k, v in sorted(getattr(part.module, "config", {}).items()) if k not in TRAINING_ONLY}
    recipe = {"format": VECTORS_FORMAT, "class": type(part.module).__name__, "inputs": part.inputs, "config": config,
              "weights": weights_digest(part.module), "rows": ROWS[part.inputs]}
    if part.inputs != "text":
        recipe.update(vocab=encoder.vocab.version, max_words=encoder.max_words)
    recipe = json.loads(json.dumps(recipe, sort_keys=True, default=str))
    part.module._deepsent_part_recipe = recipe  # weights are fixed once loaded: hash them once
    return recipe


def part_key(part: EncoderPart, encoder: TextEncoder) -> str:
    """The store key of ``part``'s vectors: the hash of its :func:`part_recipe` (a module may carry a key of its own,
    ``_deepsent_part_key``: a benchmark's stand-in for a half run by another runtime)."""
    recipe = json.dumps(part_recipe(part, encoder), sort_keys=True)
    return getattr(part.module, "_deepsent_part_key", None) or hashlib.sha256(recipe.encode()).hexdigest()[:24]
