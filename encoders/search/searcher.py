"""Search over a model's index: queries in, the top titles of a served mode out (``deepsent search``).

:func:`encoders.search.corpus_index.open_searcher` opens ``indexes/<model_type>/<version>/`` after
checking every file against the manifest its writer recorded: the FAISS index, ``ids.parquet`` and the
BM25 index saved beside them (``bm25/``; an index written before BM25 was saved fits BM25 on its
titles on first use). The modes are
those of :mod:`encoders.search.served`; the default is the one ``deepsent index`` measured best on
held-out clicks.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from encoders.search import served
from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from pipeline.core.errors import ConfigError
from pipeline.core.schemas import SEARCH_RESULTS_SCHEMA
from pipeline.core.store import Store
from pipeline.core.textnorm import normalize


#: Queries whose BM25 scores a searcher keeps (sparse: only the titles that share a word with the query).
BM25_KEPT = 8192


def in_memory_searcher(encoder: Any, title_vectors: np.ndarray, doc_ids: list[str], titles: list[str],
                       bm25: BM25Index) -> "Searcher":
    """The served object over a corpus held in memory (an exact index of ``title_vectors``, row i = ``doc_ids[i]``):
    what the gate and ``compare --retrieval`` search, as ``deepsent search`` searches a built index."""
    from encoders.search.topk import exact_index

    return Searcher(encoder, exact_index(title_vectors).index, pa.table({"doc_id": doc_ids, "title": titles}),
                    {"params": {}}, bm25)


class Searcher:
    """A model's query tower with its title index and BM25 index: texts in, top-k titles out."""

    def __init__(self, encoder: Any, index: Any, ids: pa.Table, manifest: dict[str, Any], bm25: BM25Index | None,
                 version: str = "", store: Store | None = None, root: str = "") -> None:
        self.encoder, self.index, self.manifest, self.version = encoder, index, manifest, version
        self.store, self.root = store, root  # where the index lives (None while it is being built)
        self.doc_ids, self.titles = ids["doc_id"].to_pylist(), ids["title"].to_pylist()
        self._bm25 = bm25
        self._bm25_seen: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # query -> its titles with a BM25 score
        self._needs_direct_map = "nprobe" in manifest["params"]  # IVF: reconstruct needs the id map

    @property
    def default_mode(self) -> str:
        """The mode measured best on held-out clicks when the index was built (``dense`` for older indexes)."""
        return str(self.manifest.get("search", {}).get("default_mode", "dense"))

    @property
    def linear_weight(self) -> float:
        """The cosine's share in ``linear``, fitted on held-out clicks when the index was built (else 0.5)."""
        return float(self.manifest.get("search", {}).get("linear_weight", 0.5))

    def search(self, queries: list[str], k: int, mode: str | None = None) -> pa.Table:
        """(query, rank, doc_id, title, score, found_by) rows: the top ``k`` titles of each query in ``mode``
        (default: :attr:`default_mode`), best first; ``found_by`` names the first stage that found each."""
        rows = self.hits(queries, k, mode)
        out: dict[str, list[Any]] = {name: [] for name in SEARCH_RESULTS_SCHEMA.names}
        for query, hits in zip(queries, rows):
            for rank, (row, score, stage) in enumerate(hits, 1):
                for name, value in zip(SEARCH_RESULTS_SCHEMA.names,
                                       (query, rank, self.doc_ids[row], self.titles[row], score, stage)):
                    out[name].append(value)
        return pa.table(out, schema=SEARCH_RESULTS_SCHEMA)

    def hits(self, queries: list[str], k: int, mode: str | None = None, vectors: np.ndarray | None = None,
             weight: float | None = None) -> list[list[served.Hit]]:
        """Per query, the top ``k`` (row, score, found_by) in ``mode`` (``vectors``: the queries already encoded;
        ``weight``: the cosine's share in ``linear``, default :attr:`linear_weight`). The first stages go
        ``max(k, DEPTH)`` deep; fewer than ``k`` hits only when fewer titles are indexed or (bm25, rerank) share
        a word with the query."""
        mode = mode or self.default_mode
        if mode not in served.MODES:
            raise ConfigError(f"search mode {mode!r} is not one of {', '.join(served.MODES)}")
        vectors = self.encoder.encode(queries, "query") if vectors is None else vectors
        depth = k if mode == "dense" else max(k, served.DEPTH)  # each first stage reaches k, so k hits can be served
        scores, rows = vi.search(self.index, vectors, depth)
        out = []
        for query, vector, query_scores, query_rows in zip(queries, vectors, scores, rows):
            dense = [(int(r), float(s)) for s, r in zip(query_scores, query_rows) if r >= 0]
            bm25 = np.zeros(0) if mode == "dense" else self.bm25_scores(query)
            stages = served.FirstStages(vector, dense, served.lexical_top(bm25, depth), lambda rs, b=bm25: b[rs],
                                        self._title_vectors)
            out.append(served.served_hits(mode, k, stages, self.linear_weight if weight is None else weight))
        return out

    def top_doc_ids(self, queries: list[str], k: int, mode: str, vectors: np.ndarray | None = None,
                    weight: float | None = None) -> list[list[str]]:
        """Per query, the doc ids of its top ``k`` in ``mode`` (what the default mode is chosen by)."""
        return [[self.doc_ids[row] for row, _, _ in hits] for hits in self.hits(queries, k, mode, vectors, weight)]

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25's score of every indexed title for ``query`` (fitted on first use when the index saved none).
        Scored once per query: the weight fit and the mode choice ask again for the same queries, so the
        titles with a score (those sharing a word with it) are kept for the last :data:`BM25_KEPT` queries."""
        if query not in self._bm25_seen:
            if self._bm25 is None:
                self._bm25 = BM25Index()
                self._bm25.fit_corpus(self.titles)
            scores = self._bm25.corpus_scores(normalize(query))
            rows = np.flatnonzero(scores)
            if len(self._bm25_seen) >= BM25_KEPT:
                del self._bm25_seen[next(iter(self._bm25_seen))]  # the oldest query
            self._bm25_seen[query] = (rows, scores[rows])
        rows, kept = self._bm25_seen[query]
        scores = np.zeros(len(self.titles), dtype=kept.dtype)  # the same array as scored, zeros included
        scores[rows] = kept
        return scores

    def _title_vectors(self, rows: list[int]) -> np.ndarray:
        """The indexed (unit) vectors of ``rows``, read back from the index."""
        if self._needs_direct_map:
            import faiss

            faiss.extract_index_ivf(self.index).make_direct_map()
            self._needs_direct_map = False
        return np.vstack([self.index.reconstruct(int(row)) for row in rows])

    def shortfall(self, mode: str, k: int, results: pa.Table, queries: int) -> str:
        """Why some of ``queries`` got fewer than ``k`` hits in ``results`` (what :meth:`search` returned), or ''."""
        short = queries - sum(1 for rank in results["rank"].to_pylist() if rank == k)
        if short == 0:
            return ""
        if mode in ("bm25", "rerank"):
            why = "BM25 ranks only the titles that share a word with the query"
        elif k > self.index.ntotal:
            why = f"the index holds {self.index.ntotal:,} titles"
        else:
            why = f"the approximate index's probed lists (nprobe {self.manifest['params'].get('nprobe')}) hold fewer"
        return f"{short:,} of {queries:,} queries got fewer than {k:,} hits: {why}"
