"""BM25 over a list of titles, backed by bm25s (whitespace tokens of normalised text).

The comparison's BM25 baseline (:mod:`eval.baselines.bm25`) and hybrid search over a model's
index (:mod:`encoders.search.corpus_index`) both rank with this one index.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import unique_index
from pipeline.core.errors import ConfigError


class BM25Index:
    """Okapi BM25 (bm25s, ``method`` variant) with statistics from every indexed title."""

    METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")

    def __init__(
        self, k1: float = 1.5, b: float = 0.75, method: str = "lucene", delta: float = 0.5, idf_method: str | None = None
    ) -> None:
        self.k1, self.b, self.method, self.delta = float(k1), float(b), str(method), float(delta)
        self.idf_method = idf_method
        self._index: Any = None
        self._row: dict[str, int] = {}
        self._fit_seconds = 0.0

    def fit_corpus(self, titles: Sequence[str]) -> None:
        """Index ``titles``, one document each (a text repeated by two products counts twice)."""
        import bm25s

        start = time.perf_counter()
        self._row = {}
        docs = [title.split() for title in titles]
        for row, title in enumerate(titles):
            self._row.setdefault(title, row)
        self._index = bm25s.BM25(
            k1=self.k1, b=self.b, method=self.method, idf_method=self.idf_method, delta=self.delta, dtype="float64"
        )
        self._index.index(docs, show_progress=False)
        self._fit_seconds = time.perf_counter() - start

    @property
    def num_docs(self) -> int:
        """Number of indexed documents."""
        return int(self._index.scores["num_docs"]) if self._index is not None else 0

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """BM25 score of each title for its query (one corpus pass per distinct query)."""
        if self._index is None:
            raise RuntimeError("BM25Index.score() called before fit()")
        missing = [t for t in titles if t not in self._row]
        if missing:
            raise ConfigError(f"BM25: title {missing[0]!r} is not in the indexed corpus ({len(missing)} such titles)")
        rows = np.fromiter((self._row[t] for t in titles), dtype=np.int64, count=len(titles))
        out = np.zeros(len(titles), dtype=np.float64)
        distinct, qi = unique_index(queries)
        order = np.argsort(qi, kind="stable")
        bounds = np.searchsorted(qi[order], np.arange(len(distinct) + 1))
        for q, text in enumerate(distinct):
            sel = order[bounds[q] : bounds[q + 1]]
            out[sel] = self.corpus_scores(text)[rows[sel]]
        return out

    def corpus_scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed document for ``query`` (zeros when no query word is in the corpus)."""
        if self._index is None:
            raise RuntimeError("BM25Index.corpus_scores() called before fit()")
        ids = self._index.get_tokens_ids(query.split())
        return self._index.get_scores_from_ids(ids) if ids else np.zeros(self.num_docs, dtype=np.float64)
