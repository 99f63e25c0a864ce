"""BM25 over a list of titles, backed by bm25s (whitespace tokens of normalised text).

The comparison's BM25 baseline (:mod:`eval.baselines.bm25`) and the served search over a model's
index (:mod:`encoders.search.served_index`) both rank with this one index. ``deepsent index`` saves it
beside the FAISS index (:meth:`BM25Index.to_files`, bm25s's own files) and search loads it from there
(:meth:`BM25Index.from_files`), so the lexical first stage is versioned with the vectors it is fused with.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from encoders.search.vectors import unique_index
from pipeline.core.errors import ConfigError


def sorted_vocabulary_ids(docs: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    """Each document's word ids and the vocabulary, numbered in sorted word order: bm25s numbers words in set
    (hash) order, which differs between processes, so its saved files would differ on every rebuild."""
    vocabulary = {word: i for i, word in enumerate(sorted({word for doc in docs for word in doc}))}
    return [[vocabulary[word] for word in doc] for doc in docs], vocabulary


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
        self._index.index(sorted_vocabulary_ids(docs), show_progress=False)
        self._fit_seconds = time.perf_counter() - start

    def to_files(self) -> dict[str, bytes]:
        """The fitted index as bm25s saves it: file name -> bytes (no pickles, no copy of the corpus)."""
        if self._index is None:
            raise RuntimeError("BM25Index.to_files() called before fit()")
        with tempfile.TemporaryDirectory(prefix="deepsent-bm25-") as folder:
            self._index.save(folder, show_progress=False)
            return {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir()) if path.is_file()}

    @classmethod
    def from_files(cls, files: dict[str, bytes], titles: Sequence[str]) -> "BM25Index":
        """The index :meth:`to_files` saved, over the same ``titles`` in the same order."""
        import bm25s

        with tempfile.TemporaryDirectory(prefix="deepsent-bm25-") as folder:
            for name, data in files.items():
                (Path(folder) / name).write_bytes(data)
            index = bm25s.BM25.load(folder, show_progress=False)
        loaded = cls(index.k1, index.b, index.method, index.delta, index.idf_method)
        if int(index.scores["num_docs"]) != len(titles):
            raise ValueError(f"the BM25 index holds {int(index.scores['num_docs']):,} documents, not {len(titles):,}")
        loaded._index = index
        for row, title in enumerate(titles):
            loaded._row.setdefault(title, row)
        return loaded

    def describe(self) -> dict[str, Any]:
        """The library, its version and the parameters of this index."""
        import bm25s

        version = getattr(self._index, "_original_version", None) or bm25s.__version__  # loaded: the writer's
        return {"library": "bm25s", "version": version, "method": self.method, "k1": self.k1, "b": self.b,
                "delta": self.delta, "documents": self.num_docs, "tokens": "whitespace words of normalised text"}

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
