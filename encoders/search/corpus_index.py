"""The vector index of a model's corpus, and search over it (``deepsent index`` / ``deepsent search``).

``build_index`` reads the title parts of ``embeddings/<model>-<run>/`` (written by
``encoders.search.embed``; embedded first when missing) one Parquet part at a time into a FAISS index
(``encoders.search.vector_index``: exact ``IndexFlatIP`` up to ``EXACT_MAX`` = 200,000 titles, IVF
above) and writes ``indexes/<model_type>/<version>/``:

- ``index.faiss``: the serialised FAISS index (row i = i-th title in part order);
- ``ids.parquet``: row -> (doc_id, title);
- ``manifest.json``: model URI, run, version, dimension, count, index type and parameters,
  build seconds, and the embeddings manifest it came from.

``<version>`` is the registry version for ``models:/<name>/<N>`` or ``models:/<name>@<alias>``
(``<name>-<N>`` for a registered model other than ``deepsent-<model_type>``, e.g. the served
``deepsent-ranker``), else the run id. :class:`Searcher` encodes queries with the model's query tower and returns the
top-k titles by cosine.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from encoders.model.tracking import model_uri_of, registered_name
from encoders.search import served
from encoders.search import vector_index as vi
from encoders.search.embed import EMBEDDINGS_ROOT, embed
from encoders.search.verified import checked_embeddings, checked_index
from pipeline.core.artifacts import file_facts
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.core.schemas import SEARCH_RESULTS_SCHEMA
from pipeline.core.store import Store

log = logging.getLogger(__name__)

INDEXES_ROOT = "indexes"
SEARCH_ROOT = "search"


def resolve_version(settings: Settings, model_uri: str) -> tuple[str, str]:
    """(version, run id) of ``model_uri``: the registry version of ``models:/`` URIs, else the run id."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = model_uri_of(model_uri)
    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    if match := re.fullmatch(r"models:/([^/@]+)@([^/@]+)", uri):
        name, alias = match.groups()
        try:
            version = client.get_model_version_by_alias(name, alias)
        except MlflowException:
            raise ConfigError(f"no {alias}: {uri} is not set; pass --model-uri or run deepsent promote") from None
    elif match := re.fullmatch(r"models:/([^/@]+)/(\d+)", uri):
        try:
            version = client.get_model_version(*match.groups())
        except MlflowException:
            raise ConfigError(f"no model {uri} in the registry at {settings.mlflow_tracking_uri}") from None
    elif match := re.fullmatch(r"runs:/([0-9a-f]{32})/.+", uri):
        return match.group(1), match.group(1)
    else:
        raise ConfigError(f"{model_uri} is not a model URI (runs:/<id>/model, models:/<name>/<N>, models:/<name>@<alias>)")
    return str(version.version), str(version.run_id)


def embeddings_root(store: Store, run_id: str) -> str | None:
    """The ``embeddings/<model>-<run>`` folder of ``run_id`` with a manifest, or None."""
    for name in store.list_dirs(EMBEDDINGS_ROOT):
        root = f"{EMBEDDINGS_ROOT}/{name}"
        if name.endswith(f"-{run_id}") and store.exists(f"{root}/manifest.json"):
            return root
    return None


def index_root(model_type: str, version: str, model_uri: str = "") -> str:
    """The store folder of the index of ``model_type`` at ``version`` of ``model_uri``: ``<version>`` for a run
    or the per-type registered model (``deepsent-lstm``), ``<name>-<version>`` for another registered model
    (``deepsent-ranker-3``), whose numbers count its own versions."""
    name = re.match(r"models:/([^/@]+)", model_uri_of(model_uri)) if model_uri else None
    if name and name.group(1) != registered_name(model_type):
        version = f"{name.group(1)}-{version}"
    return f"{INDEXES_ROOT}/{model_type}/{version}"


def vectors_of(table: pa.Table, dim: int) -> np.ndarray:
    """The ``vector`` column of an embeddings table as an ``(n, dim)`` float32 array."""
    flat = table["vector"].combine_chunks().flatten()
    return flat.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)


def training_query_vectors(settings: Settings, store: Store, model_uri: str, seed: int) -> np.ndarray | None:
    """Query vectors of up to :data:`vi.TUNE_QUERIES` distinct training click queries (a seeded sample of
    ``pairs/train.parquet``), what the approximate index's nprobe is tuned on: never a judged query; None
    without click pairs (the index then tunes on held-out titles)."""
    from encoders.model.loading import load_encoder

    if not store.exists("pairs/train.parquet"):
        return None
    queries = served.seeded_sample(store.read_table("pairs/train.parquet", columns=["query"])["query"].to_pylist(),
                                   seed, vi.TUNE_QUERIES)
    return load_encoder(model_uri, settings).encode(queries, "query")


def build_index(settings: Settings, model_uri: str, seed: int = SEED, exact_max: int = vi.EXACT_MAX) -> dict[str, Any]:
    """Index the titles embedded with ``model_uri`` (embedding them first if needed); writes the index folder."""
    store = Store.from_settings(settings)
    version, run_id = resolve_version(settings, model_uri)
    root, embedded = embeddings_root(store, run_id), False
    if root is None:
        log.info("no embeddings of run %s yet: embedding the corpus first", run_id)
        root, embedded = store.relpath(embed(settings, model_uri).root), True
    emb, files = checked_embeddings(store, root, model_uri)
    dim, count = int(emb["dim"]), int(emb["titles"]["rows"])
    if count == 0:
        raise ConfigError(f"{store.uri(root)}: no titles to index")

    def parts() -> Iterator[np.ndarray]:
        for _, table in store.iter_tables(f"{root}/titles", ["vector"]):
            yield vectors_of(table, dim)

    queries = training_query_vectors(settings, store, model_uri, seed) if count > exact_max else None
    built = vi.build(parts, count, dim, seed, exact_max, queries)
    ids = [t for _, t in store.iter_tables(f"{root}/titles", ["doc_id", "text"])]
    out = index_root(emb["model_type"], version, model_uri)
    written = [store.write_bytes(f"{out}/index.faiss", vi.to_bytes(built.index)),
               store.write_table(f"{out}/ids.parquet", pa.concat_tables(ids).rename_columns(["doc_id", "title"]))]
    manifest = {"model_uri": model_uri_of(model_uri), "run_id": run_id, "version": version, "model": emb["model"],
                "model_type": emb["model_type"], "dim": dim, "count": built.count, "index_type": built.kind,
                "params": built.params, "build_seconds": round(built.build_seconds, 3), "embeddings": store.uri(root),
                "embeddings_manifest": emb, "files": file_facts(store, out, written)}
    store.write_json(f"{out}/manifest.json", manifest)
    searcher, clicks = Searcher(settings, model_uri), served.held_out_clicks(store, seed)
    vectors = dict(zip(clicks, searcher.encoder.encode(list(clicks), "query"))) if clicks else {}  # once for all modes

    def search(queries: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        return searcher.top_doc_ids(queries, k, mode, np.stack([vectors[q] for q in queries]), weight)

    choice = served.choose_default_mode(search, clicks)
    store.write_json(f"{out}/manifest.json", {**manifest, "search": choice})
    summary = (f"indexed {built.count:,} titles of {emb['model']} (version {version}) with {built.kind} "
               f"{_describe(built.params)}in {built.build_seconds:.1f}s -> {store.uri(out)}; default search mode "
               f"{choice['default_mode']} (fusion weight {choice.get('fusion_weight', 0.5)}; Recall@10 on "
               f"{choice['queries']} held-out click queries: "
               + (", ".join(f"{m} {v:.3f}" for m, v in choice["recall_at_10"].items()) or "none") + ")")
    return {"root": store.uri(out), "manifest": store.uri(f"{out}/manifest.json"), "count": built.count,
            "dim": dim, "index_type": built.kind, "params": built.params, "version": version, "run_id": run_id,
            "embedded": embedded, "build_seconds": built.build_seconds, "search": choice, "summary": summary}


def _describe(params: dict[str, Any]) -> str:
    if "nprobe" not in params:
        return ""
    return f"(nlist {params['nlist']}, nprobe {params['nprobe']}, tuned recall@10 {params['tune_recall_at_10']:.3f}) "


class Searcher:
    """A model's query tower with its title index: texts in, top-k titles by cosine out."""

    def __init__(self, settings: Settings, model_uri: str) -> None:
        from encoders.model.loading import load_encoder

        self.store = Store.from_settings(settings)
        self.version, run_id = resolve_version(settings, model_uri)
        self.encoder = load_encoder(model_uri, settings)
        self.root = index_root(self.encoder.model_type, self.version, model_uri)
        if not self.store.exists(f"{self.root}/manifest.json"):
            raise ConfigError(f"no index for {self.encoder.model_type} version {self.version} at "
                              f"{self.store.uri(self.root)}: run deepsent index --model-uri {model_uri}")
        self.manifest, self.index, ids = checked_index(self.store, self.root, model_uri, run_id)
        self.doc_ids, self.titles = ids["doc_id"].to_pylist(), ids["title"].to_pylist()
        self._bm25: Any = None
        self._needs_direct_map = "nprobe" in self.manifest["params"]  # IVF: reconstruct needs the id map

    @property
    def default_mode(self) -> str:
        """The mode measured best on held-out clicks when the index was built (``dense`` for older indexes)."""
        return str(self.manifest.get("search", {}).get("default_mode", "dense"))

    @property
    def fusion_weight(self) -> float:
        """The cosine's share in ``fusion``, fitted on held-out clicks when the index was built (else 0.5)."""
        return float(self.manifest.get("search", {}).get("fusion_weight", 0.5))

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
        ``weight``: the cosine's share in ``fusion``, default :attr:`fusion_weight`)."""
        mode = mode or self.default_mode
        if mode not in served.MODES:
            raise ConfigError(f"search mode {mode!r} is not one of {', '.join(served.MODES)}")
        vectors = self.encoder.encode(queries, "query") if vectors is None else vectors
        scores, rows = vi.search(self.index, vectors, k if mode == "dense" else max(k, served.DEPTH))
        out = []
        for query, vector, query_scores, query_rows in zip(queries, vectors, scores, rows):
            dense = [(int(r), float(s)) for s, r in zip(query_scores, query_rows) if r >= 0]
            bm25 = np.zeros(0) if mode == "dense" else self._bm25_scores(query)
            stages = served.FirstStages(vector, dense, served.lexical_top(bm25), lambda rs, b=bm25: b[rs],
                                        self._title_vectors)
            out.append(served.served_hits(mode, k, stages, self.fusion_weight if weight is None else weight))
        return out

    def top_doc_ids(self, queries: list[str], k: int, mode: str, vectors: np.ndarray | None = None,
                    weight: float | None = None) -> list[list[str]]:
        """Per query, the doc ids of its top ``k`` in ``mode`` (what the default mode is chosen by)."""
        return [[self.doc_ids[row] for row, _, _ in hits] for hits in self.hits(queries, k, mode, vectors, weight)]

    def _bm25_scores(self, query: str) -> np.ndarray:
        """BM25's score of every indexed title for ``query`` (the BM25 index built on first use)."""
        from encoders.search.bm25 import BM25Index
        from pipeline.core.textnorm import normalize

        if self._bm25 is None:
            self._bm25 = BM25Index()
            self._bm25.fit_corpus(self.titles)
        return self._bm25.corpus_scores(normalize(query))

    def _title_vectors(self, rows: list[int]) -> np.ndarray:
        """The indexed (unit) vectors of ``rows``, read back from the index."""
        if self._needs_direct_map:
            import faiss

            faiss.extract_index_ivf(self.index).make_direct_map()
            self._needs_direct_map = False
        return np.vstack([self.index.reconstruct(int(row)) for row in rows])
