"""The FAISS index core: exact search is brute force, IVF reaches its recall, parts do not matter, seeds repeat."""
from __future__ import annotations

import faiss
import numpy as np
import pytest

from encoders.search import vector_index as vi
from encoders.search.vectors import unit

faiss.omp_set_num_threads(1)


def random_vectors(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    """``n`` random (not normalised) float32 vectors."""
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def clustered_vectors(n: int, dim: int = 32, centres: int = 400, seed: int = 0, noise_seed: int | None = None) -> np.ndarray:
    """``n`` vectors around ``centres`` random directions of ``seed`` (embeddings are clustered, not uniform)."""
    centre = unit(np.random.default_rng(seed).standard_normal((centres, dim)).astype(np.float32))
    rng = np.random.default_rng(seed if noise_seed is None else noise_seed)
    return centre[rng.integers(0, centres, n)] + 0.05 * rng.standard_normal((n, dim)).astype(np.float32)


def brute_force(corpus: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k cosine by numpy: normalise, all dot products, full argsort (ties by lower id)."""
    c = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = q @ c.T
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, ids, axis=1), ids


def test_exact_search_equals_numpy_top_k() -> None:
    corpus, queries = random_vectors(3000), random_vectors(50, seed=1)
    built = vi.build(vi.chunks(corpus, 700), len(corpus), 32)
    assert built.kind == "IndexFlatIP" and built.count == 3000
    scores, ids = vi.search(built.index, queries, 10)
    want_scores, want_ids = brute_force(corpus, queries, 10)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)


def test_ivf_reaches_its_recall_target() -> None:
    corpus = clustered_vectors(20_000)
    built = vi.build(vi.chunks(corpus, 6000), len(corpus), 32, seed=3, exact_max=10_000)
    assert built.kind == "IndexIVFScalarQuantizer" and built.params["codes"] == "fp16"
    assert built.params["nlist"] == vi.nlist_for(20_000) == 566
    assert built.params["tune_recall_at_10"] >= vi.TARGET_RECALL
    queries = clustered_vectors(300, noise_seed=9)  # fresh queries, never seen by the build
    _, ids = vi.search(built.index, queries, 10)
    _, want = brute_force(corpus, queries, 10)
    assert vi.recall_at_k(ids, want) >= 0.95
    assert built.index.nprobe == built.params["nprobe"] < built.params["nlist"]
    assert built.params["tune_recall_at_10"] >= vi.TUNE_RECALL


def test_what_the_index_holds_per_size() -> None:
    assert [vi.plan(n) for n in (1, vi.EXACT_MAX, vi.EXACT_MAX + 1, 10**7)] == ["exact", "exact", "fp16", "fp16"]
    assert vi.nlist_for(20_000) == 566 and vi.nlist_for(10**6) == 4000 and vi.nlist_for(10**7) == vi.NLIST_MAX
    built = vi.build(vi.chunks(clustered_vectors(12_000), 5000), 12_000, 32, seed=3, exact_max=10_000)
    assert len(vi.to_bytes(built.index)) < 12_000 * 32 * 2 * 1.5  # two bytes a dimension, and the lists' ids


def test_nprobe_is_the_smallest_that_reaches_the_tuning_target() -> None:
    corpus = clustered_vectors(20_000)
    built = vi.build(vi.chunks(corpus, 6000), len(corpus), 32, seed=3, exact_max=10_000)
    index = built.index
    held_out = clustered_vectors(1000, noise_seed=5)
    _, truth = brute_force(corpus, held_out, 10)
    found, recall = vi.tune_nprobe(index, held_out, truth)
    assert recall >= vi.TUNE_RECALL and index.nprobe == found
    if found > 1:  # one list fewer misses the target: not merely the next power of two
        index.nprobe = found - 1
        assert vi.recall_at_k(index.search(held_out, 10)[1], truth) < vi.TUNE_RECALL


@pytest.mark.parametrize("exact_max", [vi.EXACT_MAX, 5000])
def test_parts_do_not_matter_and_the_seed_repeats(exact_max: int) -> None:
    corpus = clustered_vectors(8000, seed=4)
    one = vi.build(vi.chunks(corpus, len(corpus)), len(corpus), 32, seed=1, exact_max=exact_max)
    many = vi.build(vi.chunks(corpus, 999), len(corpus), 32, seed=1, exact_max=exact_max)
    assert one.params == many.params
    assert vi.to_bytes(one.index) == vi.to_bytes(many.index)


def test_serialised_index_searches_the_same() -> None:
    corpus, queries = clustered_vectors(6000, seed=5), clustered_vectors(40, seed=6)
    built = vi.build(vi.chunks(corpus, 1000), len(corpus), 32, seed=2, exact_max=1000)
    loaded = vi.from_bytes(vi.to_bytes(built.index), built.params)
    assert loaded.nprobe == built.params["nprobe"]
    for got, want in zip(vi.search(loaded, queries, 5), vi.search(built.index, queries, 5)):
        np.testing.assert_array_equal(got, want)


def test_k_above_the_corpus_size_and_a_wrong_count() -> None:
    corpus = random_vectors(7)
    built = vi.build(vi.chunks(corpus, 3), 7, 32)
    scores, ids = vi.search(built.index, corpus[:2], 10)
    assert ids.shape == (2, 7) and sorted(ids[0]) == list(range(7)) and ids[0, 0] == 0
    with pytest.raises(ValueError, match="expected 8 vectors"):
        vi.build(vi.chunks(corpus, 3), 8, 32)
