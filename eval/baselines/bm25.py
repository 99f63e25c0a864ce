"""BM25 over the whole title corpus, backed by bm25s (whitespace tokens of normalised text)."""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from eval.baselines.base import FitContext
from eval.baselines.model import unique_index
from eval.catalog import BaselineSpec
from pipeline import validators as v
from pipeline.errors import ConfigError

#: FitContext.extra key holding the title corpus (one title per product, both judgment files).
CORPUS_KEY = "corpus_titles"


def corpus_titles(ctx: FitContext) -> list[str]:
    """The corpus for term statistics: ``ctx.extra[CORPUS_KEY]``, else train + test titles."""
    titles = ctx.extra.get(CORPUS_KEY)
    return list(titles) if titles is not None else list(ctx.train_titles) + list(ctx.test_titles)


SPEC = BaselineSpec(name="bm25", label="BM25", cls="BM25Scorer", order=1)


class BM25Scorer:
    """Okapi BM25 (bm25s, ``method`` variant) with statistics from every title of the corpus."""

    name = "bm25"
    METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
    OPTIONS = {"k1": v.non_negative_float, "b": v.unit_interval, "delta": v.non_negative_float,
               "method": v.choice(*METHODS), "idf_method": v.choice(*METHODS)}

    def __init__(
        self, k1: float = 1.5, b: float = 0.75, method: str = "lucene", delta: float = 0.5, idf_method: str | None = None
    ) -> None:
        self.k1, self.b, self.method, self.delta = float(k1), float(b), str(method), float(delta)
        self.idf_method = idf_method
        self._index: Any = None
        self._row: dict[str, int] = {}
        self._fit_seconds = 0.0

    def fit(self, ctx: FitContext) -> None:
        """Index the corpus; judged titles missing from it are added, so every pair is scorable."""
        corpus = corpus_titles(ctx)
        known = set(corpus)
        self.fit_corpus(corpus + [t for t in dict.fromkeys(ctx.test_titles) if t not in known])

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
            raise RuntimeError("BM25Scorer.score() called before fit()")
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
            raise RuntimeError("BM25Scorer.corpus_scores() called before fit()")
        ids = self._index.get_tokens_ids(query.split())
        return self._index.get_scores_from_ids(ids) if ids else np.zeros(self.num_docs, dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        return {
            "settings": f"{self.method}, k1={self.k1:g}, b={self.b:g}, {self.num_docs} titles",
            "params": None,
            "fit_seconds": self._fit_seconds,
        }
