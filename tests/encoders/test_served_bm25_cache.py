"""The served index's BM25 cache: bounded in bytes (not in queries), the oldest queries dropped first, and every
answer the same as BM25's own scores whether the query was kept, dropped or never kept."""
from __future__ import annotations

import numpy as np

from encoders.search.bm25 import BM25Index
from encoders.search.served_index import BM25_ENTRY_OVERHEAD, ServedIndex

WORDS = [f"w{i}" for i in range(40)]


def _index(titles: int = 3_000) -> ServedIndex:
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=6)) + f" t{row}" for row in range(titles)]
    bm25 = BM25Index()
    bm25.fit_corpus(texts)
    vectors = rng.normal(size=(titles, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return ServedIndex.in_memory(None, vectors, [f"d{row}" for row in range(titles)], texts, bm25)


def _held(index: ServedIndex) -> int:
    """The bytes the cache's arrays hold, measured from the arrays themselves."""
    return sum(entry[0].nbytes + entry[1].nbytes for entry in index._bm25_seen.values())


def test_many_distinct_queries_keep_the_cache_within_its_byte_bound() -> None:
    index, bound = _index(), 200_000
    index.bm25_cache_bytes = bound
    fresh = BM25Index()
    fresh.fit_corpus(index.titles)
    held, counted = [], []
    for number in range(600):  # common words: each query scores about a third of the titles
        query = f"{WORDS[number % 40]} {WORDS[(number * 7) % 40]} q{number}"
        np.testing.assert_array_equal(index.bm25_scores(query), fresh.corpus_scores(query))
        held.append(_held(index))
        counted.append(getattr(index, "bm25_cache_size", None))
    assert max(held) <= bound, f"the cache held up to {max(held):,} bytes"
    assert all(size is not None and measured <= size <= bound for measured, size in zip(held, counted))
    assert 0 < len(index._bm25_seen) < 600 and f"{WORDS[599 % 40]} {WORDS[(599 * 7) % 40]} q599" in index._bm25_seen
    assert index.bm25_cache_size == sum(entry[2] for entry in index._bm25_seen.values())
    assert all(entry[2] >= entry[0].nbytes + entry[1].nbytes + BM25_ENTRY_OVERHEAD
               for entry in index._bm25_seen.values())
    first = f"{WORDS[0]} {WORDS[0]} q0"  # dropped long ago: scored again, the same
    np.testing.assert_array_equal(index.bm25_scores(first), fresh.corpus_scores(first))


def test_a_cache_of_zero_bytes_keeps_nothing_and_answers_the_same() -> None:
    index = _index(500)
    index.bm25_cache_bytes = 0
    fresh = BM25Index()
    fresh.fit_corpus(index.titles)
    for query in ("w1 w2", "w3", "w1 w2"):
        np.testing.assert_array_equal(index.bm25_scores(query), fresh.corpus_scores(query))
    assert index._bm25_seen == {} and index.bm25_cache_size == 0
