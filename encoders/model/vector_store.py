"""Vectors stored once per encoder part and weights: each text goes through each set of weights at most once.

An *encoder part* turns texts into vectors with one set of weights: a model's query or document tower, or one
half of an ensemble tower (its LSTM-RNN, its MiniLM) (:meth:`~encoders.model.text_encoder.TextEncoder.parts`).
Its key (:func:`encoders.model.text_encoder.part_key`) hashes its weights and what else its vectors depend on. :class:`StoredEncoder` wraps a
:class:`~encoders.model.text_encoder.TextEncoder` and answers ``encode(texts, side)`` from ``vectors/<key>/`` in
the store, encoding only the texts no earlier consumer encoded; an ensemble's vectors are joined from its halves'
as its tower joins them, so the packaged MiniLM half (the same weights in every run) is encoded once per store.

Each batch of new vectors is one part, ``part-<digest>.parquet`` (normalised text, vector), published with a
record that binds it to its key (``part-<digest>.json``, written after it; the store's writes are atomic) and
checked against that record, the folder it sits in and the encoder part that reads it before one vector is used
(:mod:`encoders.model.vector_parts`); a vector with a NaN or infinite value is never stored. Parts are never
rewritten, so two writers at once (two DAG tasks) never lose each other's vectors, and texts are encoded in
shape-stable batches (:mod:`encoders.model.shape_batches`), so a text encoded again (its part removed, or in
another shard) gets the same bytes. Long encodes log progress (texts done, texts/s, time left).
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from typing import Any

import numpy as np

from encoders.model.text_encoder import EncoderPart, TextEncoder, joined, part_key, part_recipe
from encoders.model.vector_parts import NonFiniteVectors, PartReader, finite_rows, part_bytes, part_record
from pipeline.storage.artifacts import ArtifactError
from pipeline.storage.store import Store
from pipeline.text.textnorm import normalize
from pipeline.storage.locations import folder

log = logging.getLogger(__name__)

VECTORS_ROOT = folder("vectors")
#: Seconds between progress lines of a long encode.
PROGRESS_EVERY_S = 15.0
#: Encoder parts whose vectors a process keeps in memory between calls.
MEMO_SIZE = 6
#: Encodes of fewer texts log nothing.
QUIET_BELOW = 2000


class PartVectors:
    """The stored vectors of one encoder part (``vectors/<key>/``), read part by part, each checked first
    (:class:`~encoders.model.vector_parts.PartReader`)."""

    _memo: dict[tuple[str, str], tuple[set[str], dict[str, np.ndarray]]] = {}

    def __init__(self, store: Store, part: EncoderPart, encoder: TextEncoder) -> None:
        self.store, self.key = store, part_key(part, encoder)
        self.folder = f"{VECTORS_ROOT}/{self.key}"
        self.recipe, self.dim = part_recipe(part, encoder), int(part.module.out_dim)
        self.writer = {"run_id": str(encoder.run_id), "encoder": f"{encoder.label}: {type(part.module).__name__}"}

    def known(self) -> dict[str, np.ndarray]:
        """Vector of every text stored so far (parts this process read before are not read again, unless a part it
        read is gone: then all are read afresh)."""
        records = self._records()
        seen, vectors = self._memo.pop((self.store.uri(), self.key), (set(), {}))
        if not seen <= set(records):
            seen, vectors = set(), {}
        reader = PartReader(self.store, self.folder, self.key, self.recipe, self.dim)
        for record in records:
            if record not in seen:
                vectors.update(reader.read(record))
                seen.add(record)
        self._remember(seen, vectors)
        return vectors

    def _records(self) -> list[str]:
        """The part records of the key folder; one line when a file sits where the folder (or ``vectors/``) should."""
        try:
            return self.store.list_files(self.folder, ".json")
        except NotADirectoryError:
            blocker = self.folder if self.store.exists(self.folder) else VECTORS_ROOT
            raise ArtifactError(self.store.uri(blocker), "a file where the folder of stored vectors should be",
                                f"rm {self.store.uri(blocker)}") from None

    def _remember(self, seen: set[str], vectors: dict[str, np.ndarray]) -> None:
        """Keep this part's vectors for the next call (the :data:`MEMO_SIZE` most recent parts at most)."""
        self._memo[(self.store.uri(), self.key)] = (seen, vectors)
        while len(self._memo) > MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        """Publish the vectors of ``texts`` as a new part, then its record; none when a value is not finite."""
        bad = finite_rows(vectors)
        if bad.size:
            raise NonFiniteVectors(f"{self.store.uri(self.folder)}: {self.writer['encoder']} (run "
                                   f"{self.writer['run_id'] or 'none'}) gave a NaN or infinite value in "
                                   f"{bad.size:,} of {len(texts):,} vectors (the first of {texts[bad[0]]!r}); none "
                                   "was stored: its weights are broken, train it again or pass another --model-uri")
        data = part_bytes(texts, vectors)
        name = f"{self.folder}/part-{hashlib.sha256(data).hexdigest()[:20]}"
        self.store.write_bytes(f"{name}.parquet", data)
        self.store.write_json(f"{name}.json", part_record(f"{name}.parquet", self.key, self.recipe, self.writer,
                                                          self.dim, len(texts), data))
        seen, known = self._memo.pop((self.store.uri(), self.key), (set(), {}))
        self._remember(seen | {f"{name}.json"}, {**known, **dict(zip(texts, vectors))})  # not read back: just written


class Progress:
    """Progress of a long encode as log lines (stderr, the task log): texts done, texts/s, time left, every
    :data:`PROGRESS_EVERY_S`; encodes of fewer than :data:`QUIET_BELOW` texts stay quiet."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.done = what, total, 0
        self.started = self.last = time.perf_counter()
        if total >= QUIET_BELOW:
            log.info("%s: %s texts", what, f"{total:,}")

    def __call__(self, count: int) -> None:
        """``count`` more texts done."""
        self.done += count
        now = time.perf_counter()
        rate = self.done / max(now - self.started, 1e-9)
        if self.total < QUIET_BELOW:
            return
        if self.done >= self.total:
            log.info("%s: %s texts in %.1f s, %.0f texts/s", self.what, f"{self.total:,}", now - self.started, rate)
        elif now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            log.info("%s: %s/%s texts, %.0f texts/s, about %.0f s left", self.what, f"{self.done:,}",
                     f"{self.total:,}", rate, (self.total - self.done) / max(rate, 1e-9))


class StoredEncoder:
    """A :class:`TextEncoder` whose vectors come from the store, encoding only texts no one encoded before."""

    def __init__(self, encoder: TextEncoder, store: Store) -> None:
        self.encoder, self.store = encoder, store
        self.encoded: Counter = Counter()  # texts encoded here, by part key

    def __getattr__(self, name: str) -> Any:  # label, dim, run_id, model_type, ...: the wrapped encoder's
        return getattr(self.encoder, name)

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """``(N, d)`` vectors of ``texts`` from the ``query`` or ``doc`` side, as ``TextEncoder.encode`` gives them
        (in its default shape-stable batches: a text's stored vector never depends on the texts encoded with it)."""
        texts = [normalize(t) for t in texts]
        parts = self.encoder.parts(side)
        return joined([self._part_vectors(part, texts, side) for part in parts], parts)

    def missing(self, texts: list[str], side: str) -> list[str]:
        """The distinct normalised ``texts`` some part of ``side`` has no stored vector of (what an encode would
        encode), in first-seen order."""
        texts = list(dict.fromkeys(normalize(t) for t in texts))
        lacking: set[str] = set()
        for part in self.encoder.parts(side):
            known = PartVectors(self.store, part, self.encoder).known()
            lacking.update(t for t in texts if t not in known)
        return [t for t in texts if t in lacking]

    def _part_vectors(self, part: EncoderPart, texts: list[str], side: str) -> np.ndarray:
        shelf = PartVectors(self.store, part, self.encoder)
        key, known = shelf.key, shelf.known()
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            what = f"{self.encoder.label}: {type(part.module).__name__} {key[:8]} encoding {side} texts"
            progress = Progress(what, len(missing))
            vectors = self.encoder.run_tower(part.module, part.inputs, missing, progress=progress, side=side)
            shelf.add(missing, vectors)
            self.encoded[key] += len(missing)
            known = {**known, **dict(zip(missing, vectors))}
        if not texts:
            return np.empty((0, part.module.out_dim), dtype=np.float32)
        return np.stack([known[t] for t in texts])


def stored(encoder: Any, store: Store | None) -> Any:
    """``encoder`` reading and writing the store's vectors: a :class:`StoredEncoder` around a
    :class:`TextEncoder`; anything else (a stand-in, one already stored, no store) as it is."""
    if store is None or isinstance(encoder, StoredEncoder) or not isinstance(encoder, TextEncoder):
        return encoder
    return StoredEncoder(encoder, store)
