"""Top-k corpus rows per query: FAISS search over unit vectors (exact or approximate), and full-corpus score vectors.

The corpus rows are kept in ascending document-id order, so the project's tie rule (ties broken
by ascending document id, never by label) is "ties broken by ascending row". FAISS (1.15) keeps
the lowest ids of a tie group cut at k but returns tied results in descending id order, so each
result list is fetched :data:`TIE_MARGIN` deeper and re-sorted by (score rounded to
:data:`TIE_DECIMALS` decimals, descending; row, ascending); rounding makes float32 noise between
FAISS's code paths (BLAS batches vs single queries) count as a tie.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from encoders.search import vector_index as vi
from encoders.search.vectors import unit

TIE_DECIMALS = 6
#: Extra results fetched beyond the depth, so that near-ties at the cut are re-sorted by the tie rule.
TIE_MARGIN = 8


def top_rows(scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` best rows of one full-corpus score vector, ties by ascending row."""
    return np.argsort(-np.round(np.asarray(scores, dtype=np.float64), TIE_DECIMALS), kind="stable")[:depth]


def _tie_sorted(scores: np.ndarray, rows: np.ndarray, depth: int) -> np.ndarray:
    """Each row of ``rows`` re-sorted by (rounded score desc, row asc) and cut to ``depth``; -1 padding last."""
    keyed = np.where(rows >= 0, np.round(scores.astype(np.float64), TIE_DECIMALS), -np.inf)
    order = np.lexsort((np.where(rows >= 0, rows, np.iinfo(np.int64).max), -keyed), axis=-1)
    return np.take_along_axis(rows, order, axis=1)[:, :depth]


def search_rows(index: Any, queries: np.ndarray, depth: int) -> np.ndarray:
    """(queries, depth) rows of ``index``'s top results per query (normalised here), by the tie rule; -1 pads."""
    depth = min(depth, index.ntotal)
    scores, rows = index.search(unit(queries), min(depth + TIE_MARGIN, index.ntotal))
    return _tie_sorted(scores, rows, depth)


def exact_index(vectors: np.ndarray) -> vi.BuiltIndex:
    """An exact ``IndexFlatIP`` over the unit-scaled ``vectors`` (encoders.search.vector_index)."""
    return vi.build(vi.chunks(vectors, 50_000), len(vectors), vectors.shape[1], exact_max=len(vectors))



def rows_by_scoring(score_corpus: Callable[[str], np.ndarray], queries: list[str], depth: int) -> np.ndarray:
    """(queries, depth) rows ranked by ``score_corpus(query)`` (one score per corpus row), ties by row."""
    cache: dict[str, np.ndarray] = {}
    for query in queries:
        if query not in cache:
            cache[query] = top_rows(score_corpus(query), depth)
    return np.stack([cache[q] for q in queries]) if queries else np.zeros((0, depth), np.int64)
