"""Letter-trigram word hashing, the paper's fixed operator W_h, with a versioned vocabulary.

A word ``w`` becomes ``#w#`` and its letter trigrams (over Unicode code points), so ``cat`` ->
``#ca cat at#``, ``a`` -> ``#a#`` and ``aaaa`` -> ``#aa`` + ``aaa`` (count 2) + ``aa#``. A word is
stored as its distinct known trigram ids (in order of first occurrence) with their counts.

Unknown trigrams: as in W_h, a trigram outside the vocabulary has no input row and is left out
of its word. A word none of whose trigrams is known would then be empty; it becomes the single
reserved id 0 (:data:`UNKNOWN_ID`) with count 1, so every word keeps a representation (one
learned "unknown word" row) and sentence lengths never change. Known trigrams get ids
``1..size-1`` ordered by (-training count, trigram), so equal training text gives equal ids.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import InputError
from pipeline.features.text_arrays import split_words, trigram_keys, word_counts
from pipeline.features.vocab_file import checked_fields, read_vocab_json
from pipeline.storage.schemas import SENTENCE_COUNTS, SENTENCE_IDS
from pipeline.storage.store import Store
from pipeline.text.textnorm import tokens

UNKNOWN_ID = 0
VOCAB_FORMAT = "deepsent-trigram-vocab/1"
_MAX_COUNT = np.iinfo(np.int16).max  # counts are stored as int16; a longer run of one trigram is capped


def word_trigrams(word: str) -> list[str]:
    """The letter trigrams of ``#word#`` in order, repeats included (empty word -> none)."""
    if not word:
        return []
    marked = f"#{word}#"
    return [marked[i : i + 3] for i in range(len(marked) - 2)]


def word_bag(word: str, index: Mapping[str, int]) -> tuple[list[int], list[int]]:
    """(ids, counts) of a word's known trigrams, first-occurrence order; all unknown -> ([0], [1])."""
    counts: dict[int, int] = {}
    lookup = index.get
    marked = f"#{word}#" if word else ""
    for i in range(len(marked) - 2):
        tid = lookup(marked[i : i + 3])
        if tid is not None:
            counts[tid] = counts.get(tid, 0) + 1
    if not counts:
        return [UNKNOWN_ID], [1]
    values = list(counts.values())
    if len(marked) - 2 > _MAX_COUNT:
        values = [min(c, _MAX_COUNT) for c in values]
    return list(counts), values


@dataclass(frozen=True)
class WordBags:
    """Precomputed bags of known words: ``words[k]`` hashes to ``ids[k]`` with ``counts[k]``."""

    words: pa.Array
    ids: pa.ListArray
    counts: pa.ListArray


@dataclass(frozen=True)
class EncodedSentences:
    """Sentences as stored in shards: ids and counts per word (list<list<int>>), plus word counts."""

    ids: pa.ListArray
    counts: pa.ListArray
    words_in: np.ndarray  # words per sentence before truncation

    def truncated(self, max_words: int | None) -> int:
        """Number of sentences that lost words to ``max_words``."""
        return 0 if not max_words else int((self.words_in > max_words).sum())


class TrigramVocab:
    """Trigram -> id map (0 = unknown) built from training text; saved and versioned by content."""

    def __init__(self, trigrams: Sequence[str], counts: Sequence[int] | None = None, min_count: int = 1) -> None:
        self.trigrams = tuple(trigrams)
        self.counts = tuple(int(c) for c in counts) if counts is not None else (0,) * len(self.trigrams)
        self.min_count = int(min_count)
        self.index = {t: i + 1 for i, t in enumerate(self.trigrams)}
        if len(self.index) != len(self.trigrams):
            raise ValueError("duplicate trigram in vocabulary")
        # packed trigram keys, sorted, with their ids: the lookup table of the vectorised word_bags
        triples = [t for t in self.trigrams if len(t) == 3]  # anything else can never be a word's trigram
        keys, _ = trigram_keys(pa.array(triples, pa.string()))
        order = np.argsort(keys)
        self._keys = keys[order]
        self._key_ids = np.array([self.index[t] for t in triples], dtype=np.int64)[order]

    # ---- building --------------------------------------------------------------------------
    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_count: int = 1) -> "TrigramVocab":
        """Keep trigrams seen at least ``min_count`` times, ordered by (-count, trigram)."""
        kept = sorted(((-c, t) for t, c in counts.items() if c >= min_count))
        return cls([t for _, t in kept], [-c for c, _ in kept], min_count)

    @classmethod
    def from_word_counts(cls, words: pa.Table, min_count: int = 1) -> "TrigramVocab":
        """Vocabulary from word counts (:func:`word_counts`): each distinct word's trigrams, times its count."""
        totals: Counter[str] = Counter()
        for word, n in zip(words["word"].to_pylist(), words["count"].to_pylist()):
            for trigram in word_trigrams(word):
                totals[trigram] += n
        return cls.from_counts(totals, min_count)

    @classmethod
    def build(cls, parts: Iterable[pa.Array], min_count: int = 1, client: Any = None) -> "TrigramVocab":
        """Count the words of every text part (on Dask when ``client`` is given) and keep frequent trigrams."""
        return cls.from_word_counts(word_counts(parts, client), min_count)

    # ---- identity and persistence ---------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of ids including the reserved unknown id 0 (rows of the towers' EmbeddingBag)."""
        return len(self.trigrams) + 1

    @property
    def version(self) -> str:
        """Content hash of the trigram -> id map (equal maps, equal versions, forever)."""
        payload = json.dumps({"format": VOCAB_FORMAT, "trigrams": self.trigrams}, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what :meth:`save` writes)."""
        return {
            "format": VOCAB_FORMAT,
            "version": self.version,
            "size": self.size,
            "min_count": self.min_count,
            "unknown_id": UNKNOWN_ID,
            "trigrams": list(self.trigrams),
            "counts": list(self.counts),
        }

    def save(self, store: Store, relpath: str) -> str:
        """Write the vocabulary as JSON; returns its URI."""
        return store.write_json(relpath, self.to_dict())

    @classmethod
    def load(cls, store: Store, relpath: str) -> "TrigramVocab":
        """Read a saved vocabulary, checking its format, fields and content hash (one InputError naming the file)."""
        data = read_vocab_json(store, relpath)
        if not isinstance(data, dict) or data.get("format") != VOCAB_FORMAT:
            raise InputError(store.uri(relpath), f"not a {VOCAB_FORMAT} file")
        return cls.from_dict(data, store.uri(relpath))

    @classmethod
    def from_dict(cls, data: Any, source: str, require_version: bool = True) -> "TrigramVocab":
        """The vocabulary of :meth:`to_dict` output, checking each field and the content hash (``source`` names it
        in errors)."""
        vocab = cls(*checked_fields(data, source))
        if vocab.version != data.get("version") and (require_version or data.get("version") is not None):
            raise InputError(source, f"content hash {vocab.version} != recorded {data.get('version')}")
        return vocab

    # ---- encoding ------------------------------------------------------------------------------
    def encode(self, text: str, max_words: int | None = None) -> tuple[list[list[int]], list[list[int]]]:
        """(ids per word, counts per word) of the normalised ``text``, first ``max_words`` words."""
        words = tokens(text)
        if max_words:
            words = words[:max_words]
        bags = [word_bag(w, self.index) for w in words]
        return [b[0] for b in bags], [b[1] for b in bags]

    def encode_array(self, texts: pa.Array, max_words: int | None = None, known: WordBags | None = None) -> EncodedSentences:
        """Vectorised :meth:`encode` of normalised texts: Python only ever sees distinct words.

        Words are dictionary-encoded with Arrow; a distinct word found in ``known`` (see
        :meth:`word_bags`) reuses its bag, any other is hashed once; every occurrence is then
        an Arrow ``take`` of its bag.
        """
        words, parents, words_in = split_words(texts)
        if max_words:
            starts = np.cumsum(words_in) - words_in
            keep = (np.arange(len(parents)) - starts[parents]) < max_words
            words, parents = words.filter(pa.array(keep)), parents[keep]
        kept_per_text = np.bincount(parents, minlength=len(words_in)).astype(np.int64)
        encoded = words.dictionary_encode()
        bags, bag_of_distinct = self._bags_for(encoded.dictionary, known)
        word_bag_idx = pa.array(bag_of_distinct[encoded.indices.to_numpy(zero_copy_only=False)])
        text_offsets = pa.array(np.concatenate([[0], np.cumsum(kept_per_text)]).astype(np.int32))
        return EncodedSentences(
            ids=pa.ListArray.from_arrays(text_offsets, bags.ids.take(word_bag_idx)).cast(SENTENCE_IDS),
            counts=pa.ListArray.from_arrays(text_offsets, bags.counts.take(word_bag_idx)).cast(SENTENCE_COUNTS),
            words_in=words_in,
        )

    def word_bags(self, words: pa.Array | Sequence[str]) -> WordBags:
        """:func:`word_bag` of each of ``words``, vectorised with numpy (reusable by :meth:`encode_array`)."""
        words = words if isinstance(words, pa.Array) else pa.array(list(words), pa.string())
        keys, owner = self._word_trigram_keys(words)
        found, ids = self._lookup(keys)
        owner = owner[found]
        # distinct (word, id) pairs, counted, then put back in order of first occurrence
        _, first, counts = np.unique(owner * (len(self.trigrams) + 1) + ids, return_index=True, return_counts=True)
        first_order = np.argsort(first)
        owner, ids, counts = owner[first][first_order], ids[first][first_order], counts[first_order]
        per_word = np.bincount(owner, minlength=len(words))
        # a word with no known trigram keeps one slot: the reserved unknown id with count 1
        offsets = np.zeros(len(words) + 1, dtype=np.int32)
        np.cumsum(np.maximum(per_word, 1), out=offsets[1:])
        out_ids = np.full(offsets[-1], UNKNOWN_ID, dtype=np.int32)
        out_counts = np.ones(offsets[-1], dtype=np.int16)
        slot_in_word = np.arange(owner.size) - (np.cumsum(per_word) - per_word)[owner]
        out_ids[offsets[:-1][owner] + slot_in_word] = ids
        out_counts[offsets[:-1][owner] + slot_in_word] = np.minimum(counts, _MAX_COUNT)
        arrow_offsets = pa.array(offsets)
        return WordBags(
            words,
            pa.ListArray.from_arrays(arrow_offsets, pa.array(out_ids)),
            pa.ListArray.from_arrays(arrow_offsets, pa.array(out_counts)),
        )

    @staticmethod
    def _word_trigram_keys(words: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """:func:`trigram_keys` of ``#word#`` for each of ``words`` (null = empty word, no trigram)."""
        return trigram_keys(pc.binary_join_element_wise("#", words.fill_null(""), "#", ""))

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which packed trigram keys are in the vocabulary, and the ids of those that are."""
        if len(self._keys) == 0:
            return np.zeros(keys.size, dtype=bool), np.zeros(0, dtype=np.int64)
        slot = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        found = self._keys[slot] == keys
        return found, self._key_ids[slot[found]]

    def _bags_for(self, distinct: pa.Array, known: WordBags | None) -> tuple[WordBags, np.ndarray]:
        """Bags covering ``distinct`` (known ones reused, the rest hashed) and each word's bag index."""
        if known is None or len(known.words) == 0:
            return self.word_bags(distinct), np.arange(len(distinct))
        where = np.array(pc.index_in(distinct, value_set=known.words).fill_null(-1), dtype=np.int64)
        missing = np.flatnonzero(where < 0)
        if missing.size == 0:
            return known, where
        extra = self.word_bags(distinct.take(pa.array(missing)))
        where[missing] = len(known.words) + np.arange(missing.size)
        bags = WordBags(
            pa.concat_arrays([known.words, extra.words]),
            pa.concat_arrays([known.ids, extra.ids]),
            pa.concat_arrays([known.counts, extra.counts]),
        )
        return bags, where

    def oov_stats(self, texts: pa.Array) -> dict[str, Any]:
        """Trigram occurrences of ``texts`` outside the vocabulary, and words with no known trigram."""
        words, _, _ = split_words(texts)
        freq = pc.value_counts(words)
        keys, owner = self._word_trigram_keys(freq.field("values"))
        found, _ = self._lookup(keys)
        distinct = len(freq)
        grams = np.bincount(owner, minlength=distinct)
        known = np.bincount(owner[found], minlength=distinct)
        n = freq.field("counts").to_numpy(zero_copy_only=False).astype(np.int64)
        total, oov = int((n * grams).sum()), int((n * (grams - known)).sum())
        unknown_words = int(n[known == 0].sum())  # words are never empty here, so each has >= 1 trigram
        return {
            "trigrams": total,
            "oov_trigrams": oov,
            "oov_share": oov / total if total else 0.0,
            "words": len(words),
            "unknown_words": unknown_words,
            "unknown_word_share": unknown_words / len(words) if len(words) else 0.0,
        }


#: A bulk encoder: (vocab, texts, max_words) -> encoded sentences.
Encoder = Callable[[TrigramVocab, pa.Array, "int | None"], EncodedSentences]


def encode_vectorised(vocab: TrigramVocab, texts: pa.Array, max_words: int | None) -> EncodedSentences:
    """The shipped bulk encoder (see :meth:`TrigramVocab.encode_array`)."""
    return vocab.encode_array(texts, max_words)
