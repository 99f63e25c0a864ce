"""Unigram query likelihood with Dirichlet smoothing, and the bag-of-words helpers it shares.

score(q, d) = sum over query words w of log((c(w, d) + mu * p(w|C)) / (|d| + mu)), with the
collection model p(w|C) from every title of the corpus, add-one smoothed over the vocabulary
plus one unknown-word slot (so a query word unseen in the corpus has a small, finite
probability instead of log 0). Computed with scipy.sparse over all pairs at once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from encoders.search.vectors import unique_index
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from eval.baselines.bm25 import corpus_titles
from pipeline.core import validators as v


@dataclass(frozen=True)
class Vocabulary:
    """Word -> column; column ``size`` is the unknown-word slot of :meth:`counts`."""

    index: dict[str, int]

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> "Vocabulary":
        """Every whitespace token of ``texts``, in first-appearance order."""
        index: dict[str, int] = {}
        for text in texts:
            for word in text.split():
                index.setdefault(word, len(index))
        return cls(index)

    @property
    def size(self) -> int:
        """Number of known words (the unknown slot excluded)."""
        return len(self.index)

    def counts(self, texts: Sequence[str], unknown: bool = True) -> sp.csr_matrix:
        """(len(texts), size + unknown) word-count matrix; unseen words go to the unknown slot or are dropped."""
        rows: list[int] = []
        cols: list[int] = []
        unk = self.size
        for r, text in enumerate(texts):
            for word in text.split():
                c = self.index.get(word, unk)
                if c < unk or unknown:
                    rows.append(r)
                    cols.append(c)
        shape = (len(texts), self.size + (1 if unknown else 0))
        m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape, dtype=np.float64)
        m.sum_duplicates()
        return m


def collection_model(vocab: Vocabulary, titles: Sequence[str]) -> np.ndarray:
    """p(w|C) over the vocabulary plus the unknown slot, add-one smoothed."""
    cf = np.asarray(vocab.counts(titles).sum(axis=0)).ravel()
    return (cf + 1.0) / (cf.sum() + cf.size)


SPEC = BaselineSpec(name="ulm", label="ULM", cls="ULMScorer", order=2)


class ULMScorer:
    """Unigram language model of each title, Dirichlet-smoothed with the title collection."""

    name = "ulm"
    OPTIONS = {"mu": v.positive_float}

    def __init__(self, mu: float = 50.0) -> None:
        self.mu = float(mu)
        self._vocab: Vocabulary | None = None
        self._p_collection = np.zeros(0)
        self._fit_seconds = 0.0

    def fit(self, ctx: FitContext) -> None:
        """Collection statistics from the whole title corpus (train and judged titles)."""
        self.fit_corpus(corpus_titles(ctx))

    def fit_corpus(self, titles: Sequence[str]) -> None:
        """Build the vocabulary and collection model from ``titles``."""
        start = time.perf_counter()
        self._vocab = Vocabulary.from_texts(titles)
        self._p_collection = collection_model(self._vocab, titles)
        self._fit_seconds = time.perf_counter() - start

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """log p(query | title's smoothed unigram model) per aligned pair."""
        if self._vocab is None:
            raise RuntimeError("ULMScorer.score() called before fit()")
        uq, qi = unique_index(queries)
        ut, ti = unique_index(titles)
        q = self._vocab.counts(uq)[qi]
        d = self._vocab.counts(ut)[ti]
        mu_p = self.mu * self._p_collection
        background = q @ np.log(mu_p)
        overlap = (d @ sp.diags(1.0 / mu_p)).tocsr()
        overlap.data = np.log1p(overlap.data)
        matched = np.asarray(q.multiply(overlap).sum(axis=1)).ravel()
        qlen = np.asarray(q.sum(axis=1)).ravel()
        dlen = np.asarray(d.sum(axis=1)).ravel()
        return background + matched - qlen * np.log(dlen + self.mu)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        size = self._vocab.size if self._vocab else 0
        return {"settings": f"Dirichlet mu={self.mu:g}, {size} words", "params": None, "fit_seconds": self._fit_seconds}
