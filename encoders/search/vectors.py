"""Unit vectors and cosine scores: the one normalisation that indexes, scorers and fusion share."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

EncodeFn = Callable[[list[str], str], np.ndarray]


def unit(vectors: np.ndarray, dtype: type = np.float32) -> np.ndarray:
    """A C-contiguous ``dtype`` copy of ``vectors`` with rows scaled to unit length in float64 (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.where(norms > 0, norms, 1.0), dtype=dtype)


def unique_index(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Distinct texts in first-appearance order, and each input's position among them."""
    position: dict[str, int] = {}
    index = np.fromiter((position.setdefault(t, len(position)) for t in texts), dtype=np.int64, count=len(texts))
    return list(position), index


def cosine_pair_scores(encode: EncodeFn, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
    """Cosine of each aligned (query, title) pair; every distinct text is encoded once."""
    if len(queries) != len(titles):
        raise ValueError(f"{len(queries)} queries but {len(titles)} titles")
    uq, qi = unique_index(queries)
    ut, ti = unique_index(titles)
    qv = unit(encode(uq, "query"), np.float64) if uq else np.zeros((0, 1))
    tv = unit(encode(ut, "doc"), np.float64) if ut else np.zeros((0, 1))
    return np.einsum("ij,ij->i", qv[qi], tv[ti]) if len(queries) else np.zeros(0)
