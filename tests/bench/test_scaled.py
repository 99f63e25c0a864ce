"""The scaled corpora of the benchmarks: copies of the real products, each copy's ids and titles distinct."""
from __future__ import annotations

from bench.search.scaled import copies_of, copy_parts


def test_copies_start_with_the_real_products_and_name_each_copy() -> None:
    products = [("1", "cordless drill"), ("2", "garden hose")]
    rows = copies_of(products, 5)
    assert rows == [("1", "cordless drill"), ("2", "garden hose"), ("1~1", "cordless drill lot1"),
                    ("2~1", "garden hose lot1"), ("1~2", "cordless drill lot2")]
    assert len({pid for pid, _ in copies_of(products, 1000)}) == 1000


def test_copy_parts_stream_the_same_corpus_on_every_pass_and_its_exact_top_merges_part_by_part() -> None:
    """The 10^7 benchmark never holds its corpus: each pass makes the same parts again, and the exact answers merged
    part by part equal brute force over the whole."""
    import faiss
    import numpy as np

    from bench.search.index_streamed import exact_top
    from encoders.search.vectors import unit

    base = unit(np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32))
    parts = copy_parts(base, 1000, seed=3, noise=0.1)
    first, again = list(parts()), list(parts())
    assert [len(p) for p in first] == [300, 300, 300, 100] and np.array_equal(first[0], base)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert np.allclose(np.linalg.norm(first[2], axis=1), 1, atol=1e-5) and not np.allclose(first[1], base)
    queries = unit(np.random.default_rng(1).standard_normal((20, 16)).astype(np.float32))
    truth, _ = exact_top(parts, queries)
    whole = faiss.knn(queries, np.concatenate(first), 10, metric=faiss.METRIC_INNER_PRODUCT)[1]
    assert np.array_equal(truth, whole)
