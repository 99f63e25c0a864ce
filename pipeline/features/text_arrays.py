"""Arrow-vectorised text helpers of word hashing: code points, packed letter trigrams, whitespace words, word counts.

They work on whole ``pa.Array`` columns at once (no Python loop per word), and the word counts are the map and
reduce steps of the vocabulary build (:meth:`pipeline.features.trigram.TrigramVocab.build`), run on Dask when a client is given.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_CODE_POINT_BITS = 21  # Unicode code points fit in 21 bits, so a trigram packs into one int64


def _code_points(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Every string's Unicode code points, concatenated (int64), and the strings' offsets into them."""
    lengths = pc.utf8_length(strings).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    text = "".join(strings.to_pylist())
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64), offsets


def trigram_keys(marked: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Packed code points of every letter trigram of each (``#``-marked) string, in order, and its string's index."""
    points, offsets = _code_points(marked)
    per_string = np.maximum(np.diff(offsets) - 2, 0)
    owner = np.repeat(np.arange(len(per_string)), per_string)
    first = np.cumsum(per_string) - per_string
    start = offsets[:-1][owner] + (np.arange(owner.size) - first[owner])
    keys = (points[start] << (2 * _CODE_POINT_BITS)) | (points[start + 1] << _CODE_POINT_BITS) | points[start + 2]
    return keys, owner


def split_words(texts: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Whitespace words of every text: (flat words, sentence index of each word, words per text)."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    lists = pc.utf8_split_whitespace(texts.fill_null(""))
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists)
    keep = pc.greater(pc.utf8_length(flat), 0)  # "" and leading/trailing spaces give empty tokens
    flat, parents = flat.filter(keep), parents.filter(keep).to_numpy(zero_copy_only=False)
    return flat, parents, np.bincount(parents, minlength=len(texts)).astype(np.int64)


WORD_COUNTS_SCHEMA = pa.schema([("word", pa.string()), ("count", pa.int64())])


def count_words(texts: pa.Array) -> pa.Table:
    """Occurrences of each distinct word of ``texts`` (the map step of the vocabulary build)."""
    words, _, _ = split_words(texts)
    freq = pc.value_counts(words)
    return pa.table([freq.field("values"), freq.field("counts")], schema=WORD_COUNTS_SCHEMA)


def merge_word_counts(tables: Iterable[pa.Table]) -> pa.Table:
    """Sum partial word counts; rows sorted by word, so the result ignores how text was partitioned."""
    merged = pa.concat_tables(list(tables) or [WORD_COUNTS_SCHEMA.empty_table()])
    encoded = merged["word"].combine_chunks().dictionary_encode()
    totals = np.zeros(len(encoded.dictionary), dtype=np.int64)
    np.add.at(totals, encoded.indices.to_numpy(zero_copy_only=False), merged["count"].to_numpy())
    order = pc.sort_indices(encoded.dictionary)
    return pa.table([encoded.dictionary.take(order), pa.array(totals).take(order)], schema=WORD_COUNTS_SCHEMA)


def word_counts(parts: Iterable[pa.Array], client: Any = None) -> pa.Table:
    """Word counts over every text part, counted on Dask when ``client`` is given."""
    # compact copies: a pickled slice would carry its whole parent buffer to the worker
    parts = [pa.concat_arrays(p.chunks if isinstance(p, pa.ChunkedArray) else [p]) for p in parts]
    partials = client.gather(client.map(count_words, parts, pure=False)) if client else map(count_words, parts)
    return merge_word_counts(partials)
