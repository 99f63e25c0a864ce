"""The served index: one object that builds, publishes, opens (checked) and searches a model's corpus index.

:meth:`ServedIndex.build` reads the vector of every corpus title (``pipeline.ingest.catalog.corpus.corpus_titles``) from the
store's vectors of the model (only titles no stage encoded yet are encoded), indexes them in FAISS
(:mod:`encoders.search.vector_index`) and BM25 (:mod:`encoders.search.bm25`), chooses the served mode on held-out
clicks (:mod:`encoders.search.served`) and publishes the build atomically (:mod:`encoders.search.index_publish`,
:mod:`encoders.search.index_builds`): ``index.faiss``, ``ids.parquet`` (row -> doc_id, title), ``bm25/`` and ``manifest.json`` (model, run, version,
count, index type and parameters, BM25's description, the titles' sources, the stored vectors read, the served
mode, every file's size and SHA-256). :meth:`ServedIndex.open` resolves the live build of a model URI, checks every
file against that manifest (:mod:`encoders.search.verified`) and returns the object that searches it;
:meth:`ServedIndex.in_memory` is the same object over vectors held in memory (the gate, ``compare --retrieval``).
:meth:`ServedIndex.publish` writes a build made elsewhere (a scaled benchmark's). :meth:`ServedIndex.live_build` says
which version and build a model URI names now, and :meth:`ServedIndex.is_live` whether those are still what an
opened index serves: what tells a long-lived holder (``deepsent serve``) that a promotion or a rebuild has replaced
it. Each mode is a class of :mod:`encoders.search.modes`; each hit served is one :class:`~encoders.search.modes.Hit`.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from encoders.search import index_builds as builds
from encoders.search import index_publish
from encoders.search import served
from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from encoders.search.corpus_index import index_root, resolve_version
from encoders.search.modes import MODE, MODES, FirstStages, Hit, Labelled, ServedMode, lexical_top
from encoders.search.results import IndexResult
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.storage.schemas import SEARCH_RESULTS_SCHEMA
from pipeline.storage.store import Store
from pipeline.text.textnorm import normalize

#: The most bytes the BM25 scores of recent queries take in an index by default (a build's weight fit and mode choice
#: reread the decision queries'; ``deepsent serve`` sets its own bound, ``--bm25-cache-mb``); a query keeps only the
#: titles that share a word with it (row and score), so a common word's query takes the most.
BM25_CACHE_BYTES = 2**30
#: What one kept query costs beside its arrays (the dict slot, the tuple, two array headers), in bytes.
BM25_ENTRY_OVERHEAD = 512
#: The index's top of some query vectors: (scores, rows), each (queries, depth), as :func:`vector_index.search` gives.
DenseFound = tuple[np.ndarray, np.ndarray]


class ServedIndex:
    """A model's query tower with its title index and BM25 index: texts in, top-k titles out."""

    def __init__(self, encoder: Any, index: Any, ids: pa.Table, manifest: dict[str, Any], bm25: BM25Index | None,
                 version: str = "", store: Store | None = None, root: str = "", model_uri: str = "") -> None:
        self.encoder, self.index, self.manifest, self.version = encoder, index, manifest, version
        self.store, self.root, self.model_uri = store, root, model_uri  # where it lives (None while being built)
        self.doc_ids, self.titles = ids["doc_id"].to_pylist(), ids["title"].to_pylist()
        self._bm25 = bm25
        self._bm25_seen: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}  # query -> rows, scores, bytes
        self.bm25_cache_bytes, self.bm25_cache_size = BM25_CACHE_BYTES, 0  # its bound, and the bytes it holds now
        self._lock = threading.Lock()  # guards the BM25 cache: searches may run on several threads at once
        if "nprobe" in manifest["params"]:  # IVF: reconstruct needs the id map (made now: searches may run in threads)
            import faiss

            faiss.extract_index_ivf(index).make_direct_map()

    @classmethod
    def in_memory(cls, encoder: Any, title_vectors: np.ndarray, doc_ids: list[str], titles: list[str],
                  bm25: BM25Index | None, tune_queries: np.ndarray | None = None, seed: int = SEED,
                  exact_max: int | None = None) -> "ServedIndex":
        """The served object over a corpus held in memory (row i = ``doc_ids[i]``), its FAISS index built by the rule
        ``deepsent index`` builds by (:func:`~encoders.search.vector_index.build`: exact when small, IVF above, nprobe
        tuned on ``tune_queries``): what the gate and ``compare --retrieval`` search, so they measure what is served."""
        built = vi.build(vi.chunks(title_vectors, 50_000), len(title_vectors), title_vectors.shape[1], seed, exact_max,
                         tune_queries)
        return cls(encoder, built.index, pa.table({"doc_id": doc_ids, "title": titles}),
                   {"params": built.params, "index_type": built.kind, "build_seconds": built.build_seconds}, bm25)

    @classmethod
    def open(cls, settings: Settings, model_uri: str, reuse: "ServedIndex | None" = None) -> "ServedIndex":
        """The live build of ``model_uri``'s index, every file checked against its manifest first (``reuse``: an
        index of the same model version whose loaded encoder serves again)."""
        from encoders.model.loading import load_encoder
        from encoders.search.verified import checked_bm25, checked_index

        store = Store.from_settings(settings)
        version, run_id = resolve_version(settings, model_uri)
        same = reuse is not None and (reuse.model_uri, reuse.version) == (model_uri, version)
        encoder = reuse.encoder if same else load_encoder(model_uri, settings)
        root = index_publish.live_folder(store, model_uri, version, [encoder.model_type])
        if root is None:
            home = index_root(encoder.model_type, version, model_uri)
            raise ConfigError(f"no index for {encoder.model_type} version {version} at {store.uri(home)}: "
                              f"run deepsent index --model-uri {model_uri}")
        manifest, index, ids = checked_index(store, root, model_uri, run_id)
        bm25 = checked_bm25(store, root, manifest, ids["title"].to_pylist(), model_uri)
        return cls(encoder, index, ids, manifest, bm25, version, store, root, model_uri)

    @classmethod
    def build(cls, settings: Settings, model_uri: str, seed: int = SEED, exact_max: int | None = None,
              decision: served.DecisionQueries | None = None) -> IndexResult:
        """Index every corpus title's vector (read from the store's vectors, encoded only where missing) in FAISS and
        BM25, choose the served mode on ``decision``'s queries (``eval.decisions.served_decision``; default the
        held-out clicks), and publish the build with one manifest."""
        gathered = index_publish.gather(settings, model_uri, seed, exact_max)

        def mode_search(manifest: dict[str, Any], queries: list[str]) -> served.Search:
            return cls(gathered.encoder, gathered.built.index, gathered.ids, manifest, gathered.bm25,
                       gathered.version).mode_search(queries)

        return index_publish.write_build(gathered, mode_search, seed, decision)

    @staticmethod
    def publish(store: Store, home: str, built: vi.BuiltIndex, ids: pa.Table, bm25: BM25Index,
                described: dict[str, Any], choose: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        """Publish an index built elsewhere at ``home`` as :meth:`build` publishes its own: written beside the live
        build with its manifest (``described``, the index's facts, the mode ``choose`` picks) and switched in;
        (its folder, the mode chosen)."""
        return index_publish.publish_index(store, home, built, ids, bm25, described, choose)

    @staticmethod
    def live_build(settings: Settings, model_uri: str, served_now: "ServedIndex | None" = None) -> tuple[str, str | None]:
        """(version, live build folder) that ``model_uri`` and its index's ``current.json`` name now (the folder None:
        that version has no index yet): two small reads. ``served_now``: the index opened, whose model type's folder
        is the only one read while the version is its own (another version is looked for under every type's)."""
        version, _ = resolve_version(settings, model_uri)
        if served_now is not None and version == served_now.version:
            return version, index_publish.live_folder(served_now.store, model_uri, version,
                                                      [served_now.encoder.model_type])
        return version, index_publish.live_folder(Store.from_settings(settings), model_uri, version)

    def is_live(self, settings: Settings) -> bool:
        """Whether this is still what ``open`` would serve: the model URI names the same version, and the index's
        ``current.json`` the same build (False once a promotion or a rebuild replaced it)."""
        return self.live_build(settings, self.model_uri, self) == (self.version, self.root)

    @property
    def build_id(self) -> str:
        """The id of the build served (its folder's name; '' in memory)."""
        return builds.build_id(self.root) if self.root else ""

    @property
    def default_mode(self) -> str:
        """The mode chosen on the decision set when the index was built (``dense`` for older indexes)."""
        return str(self.manifest.get("search", {}).get("default_mode", "dense"))

    @property
    def linear_weight(self) -> float:
        """The cosine's share in ``linear``, fitted on the decision set when the index was built (else 0.5)."""
        return float(self.manifest.get("search", {}).get("linear_weight", 0.5))

    def mode(self, name: str | None) -> ServedMode:
        """The served mode called ``name`` (None: :attr:`default_mode`)."""
        name = name or self.default_mode
        if name not in MODE:
            raise ConfigError(f"search mode {name!r} is not one of {', '.join(MODES)}")
        return MODE[name]

    def search(self, queries: list[str], k: int, mode: str | None = None, vectors: np.ndarray | None = None) -> pa.Table:
        """(query, rank, doc_id, title, score, found_by) rows: the top ``k`` titles of each query in ``mode``
        (default: :attr:`default_mode`), best first; ``found_by`` names the first stage that found each."""
        found = [self.ranked(hits) for hits in self.hits(queries, k, mode, vectors)]
        return pa.Table.from_pylist([{"query": query, **hit.to_json()} for query, hits in zip(queries, found)
                                     for hit in hits], schema=SEARCH_RESULTS_SCHEMA)

    def ranked(self, hits: list[Labelled]) -> list[Hit]:
        """One query's :meth:`hits`, best first, as the :class:`~encoders.search.modes.Hit` records served."""
        return [Hit(rank, self.doc_ids[row], self.titles[row], float(np.float32(score)), stage)  # float32: as stored
                for rank, (row, score, stage) in enumerate(hits, 1)]

    def hits(self, queries: list[str], k: int, mode: str | None = None, vectors: np.ndarray | None = None,
             weight: float | None = None, dense: DenseFound | None = None) -> list[list[Labelled]]:
        """Per query, the top ``k`` (row, score, found_by) in ``mode`` (``vectors``: the queries already encoded, else
        encoded here, a single query as a live one, :meth:`live_vectors`, and asked of the index alone;
        ``weight``: the cosine's share in ``linear``, default :attr:`linear_weight`; ``dense``: the index's top of
        these vectors at this mode's depth, when already searched). The first stages go
        ``max(k, DEPTH)`` deep; fewer than ``k`` hits only when fewer titles are indexed or (bm25, rerank) share
        a word with the query."""
        served_mode = self.mode(mode)
        if vectors is None:
            vectors = self.live_vectors(queries) if len(queries) == 1 else self.encoder.encode(queries, "query")
        depth = served_mode.depth(k)
        scores, rows = dense if dense is not None else vi.search(self.index, vectors, depth)
        weight = self.linear_weight if weight is None else weight
        lexical = "bm25" in served_mode.first_stages
        out = []
        for query, vector, query_scores, query_rows in zip(queries, vectors, scores, rows):
            dense = [(int(r), float(s)) for s, r in zip(query_scores, query_rows) if r >= 0]
            bm25 = self.bm25_scores(query) if lexical else np.zeros(0)
            scored = self._bm25_rows(query, bm25) if lexical else None
            stages = FirstStages(vector, dense, lexical_top(bm25, depth, scored), lambda rs, b=bm25: b[rs],
                                 self._title_vectors)
            out.append(served_mode.hits(k, stages, weight))
        return out

    def live_vectors(self, queries: list[str]) -> np.ndarray:
        """The vectors of live queries (``deepsent search QUERY``, ``deepsent serve``), each the same bytes alone or
        beside any others (:meth:`~encoders.model.text_encoder.TextEncoder.encode_live`)."""
        return self.encoder.encode_live(queries, "query")

    def dense_alone(self, vectors: np.ndarray, depth: int) -> DenseFound:
        """The index's top ``depth`` of each of ``vectors``, one query to a FAISS call: FAISS scores a query asked
        alone otherwise than one of several (the last bits differ), so every live query is asked alone."""
        found = [vi.search(self.index, vectors[row : row + 1], depth) for row in range(len(vectors))]
        return np.concatenate([scores for scores, _ in found]), np.concatenate([rows for _, rows in found])

    def mode_search(self, queries: list[str]) -> served.Search:
        """Doc ids of ``queries``' top k in a mode (what the default mode is chosen by): each query encoded once, and
        the index searched once per (queries, depth) for every mode and weight asked."""
        vectors = dict(zip(queries, self.encoder.encode(queries, "query"))) if queries else {}
        searched: dict[tuple[tuple[str, ...], int], DenseFound] = {}

        def search(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
            stacked = np.stack([vectors[q] for q in asked])
            key = (tuple(asked), self.mode(mode).depth(k))
            if key not in searched:
                searched[key] = vi.search(self.index, stacked, key[1])
            return [[self.doc_ids[row] for row, _, _ in hits]
                    for hits in self.hits(asked, k, mode, stacked, weight, searched[key])]

        return search

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25's score of every indexed title for ``query`` (fitted on first use when the index saved none).
        Scored once per query while it is kept: the weight fit and the mode choice ask again for the same queries,
        so the titles with a score (those sharing a word with it) are kept for the latest queries, the oldest
        dropped first, within :attr:`bm25_cache_bytes` (:attr:`bm25_cache_size`: the bytes held now)."""
        seen = self._bm25_seen.get(query)
        if seen is None:
            with self._lock:  # threads (a server's searches) fit BM25 once and keep the cache whole
                if self._bm25 is None:
                    self._bm25 = BM25Index()
                    self._bm25.fit_corpus(self.titles)
            scores = self._bm25.corpus_scores(normalize(query))
            rows = np.flatnonzero(scores)
            seen = (rows.astype(np.int32 if len(self.titles) < 2**31 else np.int64), scores[rows], 0)
            self._keep(query, seen)
        rows, kept, _ = seen
        scores = np.zeros(len(self.titles), dtype=kept.dtype)  # the same array as scored, zeros included
        scores[rows] = kept
        return scores

    def _keep(self, query: str, seen: tuple[np.ndarray, np.ndarray, int]) -> None:
        """Keep ``query``'s rows and scores, dropping the oldest queries until the cache is within its bound."""
        size = seen[0].nbytes + seen[1].nbytes + len(query.encode("utf-8", "replace")) + BM25_ENTRY_OVERHEAD
        with self._lock:
            if query in self._bm25_seen or size > self.bm25_cache_bytes:
                return
            while self._bm25_seen and self.bm25_cache_size + size > self.bm25_cache_bytes:
                self.bm25_cache_size -= self._bm25_seen.pop(next(iter(self._bm25_seen)))[2]  # the oldest query
            self._bm25_seen[query] = (seen[0], seen[1], size)
            self.bm25_cache_size += size

    def _bm25_rows(self, query: str, scores: np.ndarray) -> np.ndarray:
        """The rows with a BM25 score for ``query`` (``scores``: :meth:`bm25_scores`' answer, read when the query is
        no longer kept)."""
        seen = self._bm25_seen.get(query)  # one read: another thread may evict it meanwhile
        return seen[0] if seen is not None else np.flatnonzero(scores)

    def _title_vectors(self, rows: list[int]) -> np.ndarray:
        """The indexed (unit) vectors of ``rows``, read back from the index."""
        return self.index.reconstruct_batch(np.asarray(rows, dtype=np.int64))

    def shortfall(self, mode: str, k: int, results: pa.Table, queries: int) -> str:
        """Why some of ``queries`` got fewer than ``k`` hits in ``results`` (what :meth:`search` returned), or ''."""
        short = queries - sum(1 for rank in results["rank"].to_pylist() if rank == k)
        if short == 0:
            return ""
        if "dense" not in self.mode(mode).first_stages:
            why = "BM25 ranks only the titles that share a word with the query"
        elif k > self.index.ntotal:
            why = f"the index holds {self.index.ntotal:,} titles"
        else:
            why = f"the approximate index's probed lists (nprobe {self.manifest['params'].get('nprobe')}) hold fewer"
        return f"{short:,} of {queries:,} queries got fewer than {k:,} hits: {why}"
