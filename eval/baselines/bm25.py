"""The BM25 baseline: BM25 over the whole title corpus (:mod:`encoders.search.bm25`), options from the CLI."""
from __future__ import annotations

from typing import Any

from encoders.search.bm25 import BM25Index
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from pipeline.core import validators as v

#: FitContext.extra key holding the title corpus (one title per product, both judgment files).
CORPUS_KEY = "corpus_titles"


def corpus_titles(ctx: FitContext) -> list[str]:
    """The corpus for term statistics: ``ctx.extra[CORPUS_KEY]``, else train + test titles."""
    titles = ctx.extra.get(CORPUS_KEY)
    return list(titles) if titles is not None else list(ctx.train_titles) + list(ctx.test_titles)


SPEC = BaselineSpec(name="bm25", label="BM25", cls="BM25Scorer", order=1)


class BM25Scorer(BM25Index):
    """The BM25 baseline: :class:`~encoders.search.bm25.BM25Index` with statistics from every title of the corpus."""

    name = "bm25"
    OPTIONS = {"k1": v.non_negative_float, "b": v.unit_interval, "delta": v.non_negative_float,
               "method": v.choice(*BM25Index.METHODS), "idf_method": v.choice(*BM25Index.METHODS)}

    def fit(self, ctx: FitContext) -> None:
        """Index the corpus; judged titles missing from it are added, so every pair is scorable."""
        corpus = corpus_titles(ctx)
        known = set(corpus)
        self.fit_corpus(corpus + [t for t in dict.fromkeys(ctx.test_titles) if t not in known])

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        return {
            "settings": f"{self.method}, k1={self.k1:g}, b={self.b:g}, {self.num_docs} titles",
            "params": None,
            "fit_seconds": self._fit_seconds,
        }
