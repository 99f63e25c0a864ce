"""Sentences as the towers read them: stored trigram-id sentences or raw texts -> :class:`SentenceBatch`."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from encoders.towers.batch import SentenceBatch
from pipeline.features.trigram import UNKNOWN_ID, TrigramVocab, WordBags
from pipeline.text.textnorm import normalize


def as_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One Arrow array from an array or a chunked array (chunks combined)."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _tensor(values: pa.Array, dtype: type) -> torch.Tensor:
    return torch.from_numpy(values.to_numpy(zero_copy_only=False).astype(dtype))


def sentence_batch(ids: pa.Array | pa.ChunkedArray, counts: pa.Array | pa.ChunkedArray) -> SentenceBatch:
    """A SentenceBatch from stored sentences (``list<list<int>>`` ids and counts per word)."""
    ids, counts = as_array(ids), as_array(counts)
    words = pc.list_flatten(ids)
    word_lengths = pc.list_value_length(words).to_numpy(zero_copy_only=False).astype(np.int64)
    return SentenceBatch(
        ids=_tensor(pc.list_flatten(words), np.int64),
        weights=_tensor(pc.list_flatten(pc.list_flatten(counts)), np.float32),
        offsets=torch.from_numpy(np.cumsum(word_lengths) - word_lengths),
        lengths=_tensor(pc.list_value_length(ids), np.int64),
    )


def texts_to_batch(
    texts: Sequence[str], vocab: TrigramVocab, max_words: int | None = None, known: WordBags | None = None,
    normalized: bool = False,
) -> SentenceBatch:
    """Texts (normalised here unless ``normalized``) -> SentenceBatch; an empty text becomes one unknown word."""
    texts = list(texts) if normalized else [normalize(t) for t in texts]
    encoded = vocab.encode_array(pa.array(texts, pa.string()), max_words, known)
    empty = pc.equal(pc.list_value_length(encoded.ids), 0)
    ids = pc.if_else(empty, pa.scalar([[UNKNOWN_ID]], encoded.ids.type), encoded.ids)
    counts = pc.if_else(empty, pa.scalar([[1]], encoded.counts.type), encoded.counts)
    return sentence_batch(ids, counts)
