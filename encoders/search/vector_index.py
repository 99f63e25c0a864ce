"""FAISS vector indexes over unit vectors, chosen per corpus size: exact when small, IVF over compact codes above.

Vectors are L2-normalised before they are added or searched (the towers' score is cosine, and
the embedding job stores raw tower outputs), so inner product equals cosine. What is built for ``count`` vectors
(:func:`plan`) is what ``deepsent index`` serves and what the gate, ``compare --retrieval`` and the index's mode
choice measure (``ServedIndex.in_memory`` builds by the same rule):

- up to :data:`EXACT_MAX` (20,000) vectors: ``IndexFlatIP``, exact (a scan of that many costs about what the IVF's
  probes do);
- above it: ``IndexIVFScalarQuantizer`` with inner product, its lists holding fp16 codes (half the memory of float32,
  the same recall: 10^7 × 480-d in 9.6 GB; 8-bit codes measured a recall ceiling below the target on near-duplicate
  titles, so they are not used); ``nlist = 4 * sqrt(n)`` lists, at most :data:`NLIST_MAX`, trained by seeded k-means (:data:`KMEANS_ITERATIONS`
  rounds) on a seeded sample of :data:`TRAIN_PER_LIST` vectors per list, and the
  smallest ``nprobe`` (doubled, then bisected) whose recall@10 against exact search on the tuning queries
  reaches :data:`TUNE_RECALL` (0.97), so that queries it never saw reach :data:`TARGET_RECALL` (0.95). The exact answers for tuning are merged part by part
  (``faiss.ResultHeap``), so no second copy of the corpus is held.

Vectors arrive as an iterable of parts and are added part by part (memory: the index plus one
part). IVF reads the parts twice: once for the training sample, once to add. The build is
deterministic for a seed. HNSW was not chosen: its graph depends on the order threads insert
in, and IVF reaches the recall and latency goals (``bench/search/index.py``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import faiss
import numpy as np

from encoders.search.vectors import unit
from pipeline.core.defaults import SEED

#: Largest corpus indexed exactly (IndexFlatIP); above it the IVF index is built (at the quick run's corpus the IVF
#: answers a query several times faster than the exact scan at the target recall: ``bench/results/search.json``).
EXACT_MAX = 20_000
#: Most IVF lists: a build assigns every vector to its nearest list (count × nlist products), so past 4·√count =
#: 4,096 (about 10^6 vectors) the lists grow instead of multiplying, and the build stays linear in the count.
NLIST_MAX = 4096
#: Recall@10 against exact search that the IVF index must reach on queries it was not tuned on.
TARGET_RECALL = 0.95
#: Recall@10 ``nprobe`` is tuned to on the tuning queries: a margin above :data:`TARGET_RECALL`, because
#: training click queries sit a little closer to the titles than unseen queries do (tuned to 0.95 on them,
#: the judged queries reached 0.948).
TUNE_RECALL = 0.97
#: k-means training vectors per inverted list, and k-means iterations (build time is linear in both).
TRAIN_PER_LIST = 32
KMEANS_ITERATIONS = 10
#: Held-out queries used to tune ``nprobe``.
TUNE_QUERIES = 1000
RECALL_K = 10

Parts = Callable[[], Iterable[np.ndarray]]


@dataclass
class BuiltIndex:
    """A built FAISS index and what describes it (its type, parameters, recall, build seconds)."""

    index: Any
    count: int
    dim: int
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0


def nlist_for(count: int) -> int:
    """The number of IVF lists for ``count`` vectors: about 4 * sqrt(count), at most :data:`NLIST_MAX`."""
    return max(1, min(NLIST_MAX, int(round(4 * math.sqrt(count)))))


def plan(count: int, exact_max: int | None = None) -> str:
    """What an index of ``count`` vectors holds: ``exact`` (IndexFlatIP) up to ``exact_max`` (default
    :data:`EXACT_MAX`), else ``fp16`` (IVF over fp16 codes)."""
    return "exact" if count <= (EXACT_MAX if exact_max is None else exact_max) else "fp16"


def build(parts: Parts, count: int, dim: int, seed: int = SEED, exact_max: int | None = None,
          tune_queries: np.ndarray | None = None) -> BuiltIndex:
    """An index over the vectors of ``parts()`` (``count`` rows of ``dim``) by :func:`plan`: exact up to
    ``exact_max``, else IVF over fp16 codes.

    ``tune_queries`` are held-out query vectors for tuning nprobe; without them a seeded sample of
    the corpus vectors not used for training is taken.
    """
    began = time.perf_counter()
    exact_max = EXACT_MAX if exact_max is None else exact_max
    codes = plan(count, exact_max)
    if codes == "exact":
        index = faiss.IndexFlatIP(dim)
        added = _add(index, parts)
        built = BuiltIndex(index, added, dim, "IndexFlatIP", {"metric": "inner_product", "exact_max": exact_max})
    else:
        built = _build_ivf(parts, count, dim, seed, exact_max, tune_queries, codes)
    if built.count != count:
        raise ValueError(f"expected {count} vectors, the parts held {built.count}")
    built.build_seconds = time.perf_counter() - began
    return built


def _add(index: Any, parts: Parts, on_part: Callable[[np.ndarray, int], None] | None = None) -> int:
    """Add every part (normalised) to ``index``; ``on_part(vectors, first_id)`` sees each; returns the count."""
    added = 0
    for part in parts():
        vectors = unit(part)
        if on_part is not None:
            on_part(vectors, added)
        index.add(vectors)
        added += len(vectors)
    return added


def _sample_rows(parts: Parts, rows: np.ndarray) -> np.ndarray:
    """The (normalised) vectors at sorted global row numbers ``rows``, read part by part."""
    picked, start = [], 0
    for part in parts():
        lo, hi = np.searchsorted(rows, [start, start + len(part)])
        if hi > lo:
            picked.append(unit(part[rows[lo:hi] - start]))
        start += len(part)
    return np.concatenate(picked) if picked else np.empty((0, 0), np.float32)


def _build_ivf(parts: Parts, count: int, dim: int, seed: int, exact_max: int,
               tune_queries: np.ndarray | None, codes: str) -> BuiltIndex:
    nlist = nlist_for(count)
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    train_rows = np.sort(order[: min(count, nlist * TRAIN_PER_LIST)])
    if tune_queries is None:
        held_out = order[len(train_rows):] if count > len(train_rows) else order
        queries = _sample_rows(parts, np.sort(held_out[:TUNE_QUERIES]))
    else:
        queries = unit(tune_queries[:TUNE_QUERIES])
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed, index.cp.niter, index.cp.min_points_per_centroid = seed, KMEANS_ITERATIONS, 1
    index.train(_sample_rows(parts, train_rows))
    exact = faiss.ResultHeap(len(queries), RECALL_K, keep_max=True)

    def merge_exact(vectors: np.ndarray, first_id: int) -> None:
        scores, ids = faiss.knn(queries, vectors, min(RECALL_K, len(vectors)), metric=faiss.METRIC_INNER_PRODUCT)
        exact.add_result(scores, np.where(ids >= 0, ids + first_id, -1))

    added = _add(index, parts, merge_exact)
    exact.finalize()
    nprobe, recall = tune_nprobe(index, queries, exact.I)
    params = {"metric": "inner_product", "codes": codes, "nlist": nlist, "nprobe": nprobe, "train_vectors": int(len(train_rows)),
              "seed": seed, "exact_max": exact_max, "tune_queries": int(len(queries)),
              "tune_recall_at_10": recall, "tuned_to_recall_at_10": TUNE_RECALL,
              "target_recall_at_10": TARGET_RECALL}
    return BuiltIndex(index, added, dim, "IndexIVFScalarQuantizer", params)


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Share of the true top-k ids (rows of ``truth``) that ``found`` also returned, over all queries."""
    hits = sum(len(np.intersect1d(f[f >= 0], t[t >= 0])) for f, t in zip(found, truth))
    return hits / max(1, int((truth >= 0).sum()))


def tune_nprobe(index: Any, queries: np.ndarray, truth: np.ndarray) -> tuple[int, float]:
    """The smallest nprobe whose recall@k on ``queries`` reaches TUNE_RECALL (set on ``index``): doubled until it
    does, then bisected between the last two tries (recall never falls as more lists are probed)."""

    def recall_with(nprobe: int) -> float:
        index.nprobe = nprobe
        return recall_at_k(index.search(queries, truth.shape[1])[1], truth)

    low, nprobe, recall = 0, 1, recall_with(1)  # low: the largest nprobe known to miss the target (0: none tried)
    while recall < TUNE_RECALL and nprobe < index.nlist:
        low, nprobe = nprobe, min(index.nlist, nprobe * 2)
        recall = recall_with(nprobe)
    while nprobe - low > 1:
        middle = (low + nprobe) // 2
        middle_recall = recall_with(middle)
        if middle_recall >= TUNE_RECALL:
            nprobe, recall = middle, middle_recall
        else:
            low = middle
    index.nprobe = nprobe
    return nprobe, recall


def search(index: Any, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores (cosine) and row ids of the top ``k`` of each query (rows normalised here); -1 pads."""
    return index.search(unit(queries), min(k, index.ntotal))


def to_bytes(index: Any) -> bytes:
    """The index serialised by FAISS."""
    return faiss.serialize_index(index).tobytes()


def from_bytes(data: bytes, params: dict[str, Any] | None = None) -> Any:
    """An index from :func:`to_bytes` output, with ``nprobe`` from ``params`` when it has one."""
    index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    if params and "nprobe" in params:
        faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])
    return index


def chunks(vectors: np.ndarray, rows: int) -> Parts:
    """Parts of an in-memory array of ``rows`` each (tests and benchmarks)."""

    def parts() -> Iterator[np.ndarray]:
        for start in range(0, len(vectors), rows):
            yield vectors[start : start + rows]

    return parts
