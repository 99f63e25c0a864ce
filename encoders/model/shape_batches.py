"""Shape-stable batches: a text's vector is the same bytes whatever texts it was encoded beside.

A tower's kernels (a recurrent step's matrix product, a transformer's attention) choose their blocking and their
order of summation by the shapes they are given, so the same text could come out a few units in the last place
apart when it was encoded in another batch (after ``rm -r vectors/<key>``, or in another Dask shard). So every
text goes through kernels of one shape only: texts are grouped by their *shape key* (their words after the word
cut for the trigram towers, their word pieces for a transformer, both for a whole ensemble tower), and every batch
holds exactly ``rows`` texts of one key, the last batch of a key filled up with copies of its first text (whose
vectors are dropped). A batch's shape is then a function of its texts' key alone, and within it each row is
computed on its own (no kernel reduces across rows), so a text's vector depends on its text, the weights and
``rows`` only (``tests/encoders/test_vector_binding.py`` encodes one set of titles in two orders and shard splits
and compares the bytes). A live query goes the same way in passes of :data:`LIVE_ROWS`, a transformer's word pieces
padded to their :func:`token_bucket` (masked out), so queries of different lengths share a pass and a query's vector
is the same bytes alone or in any server batch (``tests/deepsent/test_serve_batcher.py``).
"""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np
import pyarrow as pa

from pipeline.features.text_arrays import split_words

#: Texts per forward pass, by what the tower reads: a recurrent trigram tower runs a Python step per word, so it
#: wants many rows; a transformer's cost grows with its rows, and a key's last batch is mostly filler.
ROWS = {"trigrams": 128, "text": 16, "both": 16}
#: Texts per forward pass of a live query (``deepsent search QUERY``, ``deepsent serve``'s batches): the same for every
#: query, so its vector is the same bytes in any batch, and few, so a query alone pays for few copies (on CPU a MiniLM
#: pass costs about its rows times its word pieces: 4 rows cost twice 1, 2 rows 1.3 times).
LIVE_ROWS = 2
#: The fewest word pieces a live pass is padded to (see :func:`token_bucket`).
LIVE_TOKENS = 8


def word_counts(texts: list[str], max_words: int | None) -> np.ndarray:
    """Words each normalised text has for a trigram tower: its whitespace words, cut at ``max_words``, at least
    one (an empty text is one unknown word)."""
    counts = split_words(pa.array(texts, pa.string()))[2]
    return np.clip(counts, 1, max_words or None)


def stable_batches(keys: Sequence[Hashable], rows: int) -> list[np.ndarray]:
    """Positions of the texts of each batch: texts of one shape key together (keys in sorted order, texts in their
    given order), at most ``rows`` to a batch."""
    groups: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(key, []).append(position)
    return [np.asarray(members[start : start + rows]) for key in sorted(groups)
            for members in (groups[key],) for start in range(0, len(members), rows)]


def filled(texts: list[str], rows: int) -> list[str]:
    """``texts`` (one batch, at least one text) filled up to ``rows`` with copies of its first text."""
    return texts + [texts[0]] * (rows - len(texts))


def token_bucket(pieces: int, most: int) -> int:
    """The word pieces a live text of ``pieces`` is padded to: the smallest power of two from :data:`LIVE_TOKENS` up
    that holds it, at most ``most`` (the tower's cut). Texts of one bucket share a pass whatever their lengths."""
    bucket = LIVE_TOKENS
    while bucket < pieces:
        bucket *= 2
    return max(min(bucket, most), pieces)
