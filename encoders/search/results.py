"""The results of the search stages (the corpus encode, the index), torch-free: the chain names them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.core.results import StageResult


@dataclass(frozen=True)
class IndexResult(StageResult):
    """A model's index published and serving: where, what it holds, how many titles were encoded for it."""

    root: str
    build: str
    manifest: str
    model_uri: str
    count: int
    dim: int
    index_type: str
    params: dict[str, Any]
    version: str
    run_id: str
    encoded: int  # titles encoded for this index (0 when every vector was already in the store; by the part that
    # encoded the most, as an ensemble encodes a new title in each half)
    build_seconds: float
    search: dict[str, Any]
    refresh: dict[str, Any]  # the corpus's changes since the build it replaces (changes_since)
    seconds: dict[str, float]  # where the build's time went: loading the model, the vectors, FAISS + BM25, ...
    summary: str = ""


@dataclass(frozen=True)
class EncodeResult(StageResult):
    """The corpus encoded for a model: titles, those missing before, shards, vectors encoded per part key."""

    model_uri: str
    titles: int
    missing: int
    shards: int
    encoded: dict[str, int]
    seconds: float
    where: str
    summary: str = ""
