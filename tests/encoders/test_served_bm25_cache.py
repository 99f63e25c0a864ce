"""The served index's BM25 cache: bounded in bytes (not in queries), the oldest queries dropped first, and every
answer the same as BM25's own scores whether the query was kept, dropped or never kept."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from encoders.search.bm25 import BM25Index
from encoders.search.served_index import BM25_ENTRY_OVERHEAD, ServedIndex
from pipeline.core.config import PROJECT_ROOT

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


#: What one process runs for :func:`test_rss_stays_within_the_bound_over_distinct_queries_that_overflow_the_cache`:
#: an index of ``titles`` synthetic titles, the server's cache bound, 200 queries to warm up, then ``queries`` distinct
#: queries; the resident set before and after them, and the cache's bytes, as JSON.
RSS_PROBE = """
import json, sys
import numpy as np
from deepsent.server.limits import CACHE_BYTES
from encoders.search.bm25 import BM25Index
from encoders.search.served_index import ServedIndex

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

titles, queries = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(5)
words = np.array([f"w{i}" for i in range(2000)])
texts = [" ".join(row) for row in rng.choice(words, size=(titles, 6))]
bm25 = BM25Index()
bm25.fit_corpus(texts)
vectors = np.ones((titles, 4), dtype=np.float32) / 2
index = ServedIndex.in_memory(None, vectors, [f"d{row}" for row in range(titles)], texts, bm25,
                               exact_max=titles)  # a flat index: the point is the BM25 cache, not the IVF build
index.bm25_cache_bytes = CACHE_BYTES
ask = lambda n: index.bm25_scores(f"w{n % 2000} w{(n * 7 + 3) % 2000} q{n}")
for n in range(200):
    ask(n)
before = rss()
for n in range(200, 200 + queries):
    ask(n)
print(json.dumps({"before": before, "after": rss(), "cache": index.bm25_cache_size, "bound": CACHE_BYTES,
                  "kept": len(index._bm25_seen)}))
"""


@pytest.mark.slow  # over 10 s: thousands of BM25 queries over a million titles
@pytest.mark.parametrize(("titles", "queries"), [(44_000, 20_000), (1_000_000, 2_500)])
def test_rss_stays_within_the_bound_over_distinct_queries_that_overflow_the_cache(titles: int, queries: int) -> None:
    """The server's cache bound holds the process's memory, at the quick run's size and at a million titles: the
    resident set grows by no more than the bound (plus 32 MiB of allocator slack) over distinct queries enough to fill
    the cache and drop from it (at a million titles about 900 queries fill it: 2,500 overflow it about three times)."""
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, str(titles), str(queries)], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["cache"] <= seen["bound"] and 0 < seen["kept"] < 200 + queries  # full: the oldest queries dropped
    assert seen["after"] - seen["before"] <= seen["bound"] + 32 * 2**20, seen
    print(f"{titles:,} titles: RSS {seen['before'] / 2**20:.0f} -> {seen['after'] / 2**20:.0f} MiB over {queries:,} "
          f"queries, cache {seen['cache'] / 2**20:.1f} MiB ({seen['kept']:,} queries kept) within {seen['bound'] / 2**20:.0f} MiB")
