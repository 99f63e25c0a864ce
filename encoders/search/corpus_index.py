"""Where a model's corpus index lives and what one build of it writes (the served object: :mod:`encoders.search.served_index`).

:func:`write_build` is what ``ServedIndex.build`` (``deepsent index``, the chain's index stage, the index DAG) runs:
every corpus title's vector read from the store's vectors of the model (:mod:`encoders.model.vector_store`: the
encode stage stored them; only titles no stage encoded yet are encoded) into a FAISS index
(:mod:`encoders.search.vector_index`: exact ``IndexFlatIP`` when small, IVF over compact codes above) and a
BM25 index, written beside the live build under ``builds/<build id>/`` and switched in by rewriting
``current.json`` (:mod:`encoders.search.index_builds`). ``<version>`` in ``indexes/<model_type>/<version>/`` is the
registry version for ``models:/<name>/<N>`` or ``models:/<name>@<alias>`` (``<name>-<N>`` for a registered model
other than ``deepsent-<model_type>``, e.g. the served ``deepsent-ranker``), else the run id (:func:`index_root`).
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from encoders.model.tracking import model_uri_of, registered_name
from encoders.search import index_builds as builds
from encoders.search import served
from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from encoders.search.embed import CHUNK_ROWS
from pipeline.ingest.catalog.corpus import corpus_titles
from pipeline.core.artifacts import file_facts
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.core.results import StageResult
from pipeline.core.store import Store
from pipeline.features.click_lists import held_out_clicks, seeded_sample

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


def index_root(model_type: str, version: str, model_uri: str = "") -> str:
    """The store folder of the index of ``model_type`` at ``version`` of ``model_uri``: ``<version>`` for a run
    or the per-type registered model (``deepsent-lstm``), ``<name>-<version>`` for another registered model
    (``deepsent-ranker-3``), whose numbers count its own versions."""
    name = re.match(r"models:/([^/@]+)", model_uri_of(model_uri)) if model_uri else None
    if name and name.group(1) != registered_name(model_type):
        version = f"{name.group(1)}-{version}"
    return f"{INDEXES_ROOT}/{model_type}/{version}"


def tuning_queries(store: Store, seed: int) -> list[str]:
    """Up to :data:`vi.TUNE_QUERIES` distinct training click queries (a seeded sample of ``pairs/train.parquet``), what
    an approximate index's nprobe is tuned on: never a judged query; none without click pairs (the index then tunes
    on held-out titles)."""
    if not store.exists("pairs/train.parquet"):
        return []
    return seeded_sample(store.read_table("pairs/train.parquet", columns=["query"])["query"].to_pylist(), seed,
                         vi.TUNE_QUERIES)


def tuning_vectors(store: Store, seed: int, encoder: Any, count: int, exact_max: int | None = None) -> np.ndarray | None:
    """The :func:`tuning_queries`' vectors through ``encoder`` when an index of ``count`` titles is approximate
    (:func:`vi.plan`, ``exact_max`` its exact bound), else None (nothing to tune)."""
    queries = tuning_queries(store, seed) if vi.plan(count, exact_max) != "exact" else []
    return encoder.encode(queries, "query") if queries else None


def training_query_vectors(settings: Settings, store: Store, model_uri: str, seed: int,
                           encoder: Any = None) -> np.ndarray | None:
    """The :func:`tuning_queries`' vectors through ``model_uri`` (``encoder``: the model, already loaded); None without
    click pairs."""
    from encoders.model.loading import load_encoder

    queries = tuning_queries(store, seed)
    return (encoder or load_encoder(model_uri, settings)).encode(queries, "query") if queries else None


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


def write_build(served_index: Any, settings: Settings, model_uri: str, seed: int = SEED,
                exact_max: int | None = None, decision: served.DecisionQueries | None = None) -> IndexResult:
    """What :meth:`~encoders.search.served_index.ServedIndex.build` does (``served_index``: that class): every corpus
    title's vector in FAISS and BM25, the served mode chosen on ``decision``'s queries (default: held-out clicks),
    the build published."""
    from encoders.model.loading import load_encoder
    from encoders.model.text_encoder import part_key
    from encoders.model.vector_store import StoredEncoder

    store, clock = Store.from_settings(settings), Clock()
    version, run_id = resolve_version(settings, model_uri)
    titles, sources = corpus_titles(settings, store)
    if not titles:
        raise ConfigError(f"{store.uri()}: no titles to index (no judgments and no click pairs)")
    encoder = StoredEncoder(load_encoder(model_uri, settings), store)
    clock.lap("load_s")
    vectors = encoder.encode([title for _, title in titles], "doc")
    clock.lap("vectors_s")
    encoded = max(encoder.encoded.values(), default=0)  # titles: an ensemble encodes a title once in each half
    count, dim = vectors.shape
    queries = tuning_vectors(store, seed, encoder, count, exact_max)
    built = vi.build(lambda: (vectors[i : i + CHUNK_ROWS] for i in range(0, count, CHUNK_ROWS)), count, dim, seed,
                     exact_max, queries)
    ids = pa.table({"doc_id": [doc for doc, _ in titles], "title": [title for _, title in titles]})
    bm25 = BM25Index()
    bm25.fit_corpus(ids["title"].to_pylist())
    clock.lap("faiss_bm25_s")
    home = index_root(encoder.model_type, version, model_uri)
    described = {"model_uri": model_uri_of(model_uri), "run_id": run_id, "version": version, "model": encoder.label,
                 "model_type": encoder.model_type, "dim": dim, "titles": {"rows": count, "sources": sources},
                 "vectors": [part_key(part, encoder.encoder) for part in encoder.parts("doc")]}

    def choose(manifest: dict[str, Any]) -> dict[str, Any]:
        asked = (decision or served.DecisionQueries.of_clicks(held_out_clicks(store))).within(
            set(ids["doc_id"].to_pylist()))
        fresh = served_index(encoder, built.index, ids, manifest, bm25, version)
        chosen = served.choose_default_mode(fresh.mode_search(list(asked.relevant)), asked, seed=seed)
        clock.lap("files_and_mode_choice_s")
        return chosen

    described["refresh"] = changes_since(store, home, ids)
    out, choice = publish_index(store, home, built, ids, bm25, described, choose)
    refresh = described["refresh"]
    clock.lap("publish_s")
    summary = (f"indexed {built.count:,} titles of {encoder.label} (version {version}; {encoded:,} titles "
               f"encoded now, the rest read from the store) with {built.kind} {_describe(built.params)}and BM25 in "
               f"{built.build_seconds:.1f}s -> {store.uri(out)} (now served); default search "
               f"mode {choice['default_mode']} (linear weight {choice.get('linear_weight', 0.5)}; NDCG@10 on "
               f"{choice['queries']} queries of {choice['chosen_on']}: "
               + (", ".join(f"{m} {v:.3f}" for m, v in choice["ndcg_at_10"].items()) or "none")
               + (f"; {choice['why']}" if choice.get("why") else "") + ")"
               + (f"; since the build it replaces: {refresh['added']:,} products added, {refresh['dropped']:,} "
                  f"dropped, {refresh['retitled']:,} retitled" if refresh["since"] else ""))
    return IndexResult(root=store.uri(home), build=store.uri(out), manifest=store.uri(f"{out}/manifest.json"),
                       model_uri=model_uri_of(model_uri), count=built.count, dim=dim, index_type=built.kind,
                       params=built.params, version=version, run_id=run_id, encoded=encoded,
                       build_seconds=built.build_seconds, search=choice, refresh=refresh, seconds=clock.laps,
                       summary=summary)


class Clock:
    """Seconds between laps, by name (where a build's time goes)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        """Record the seconds since the last lap under ``name``."""
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 2)
        self._last = now


def changes_since(store: Store, home: str, ids: pa.Table) -> dict[str, Any]:
    """How the corpus of a new build of the index at ``home`` differs from the live build's: products added (new
    ids), dropped (retired: ids gone) and retitled (same id, another title); ``since`` None for a first build."""
    live = builds.live_folder(store, home, "deepsent index")
    if live is None or not store.exists(f"{live}/ids.parquet"):
        return {"since": None, "added": len(ids), "dropped": 0, "retitled": 0}
    before = dict(zip(*store.read_table(f"{live}/ids.parquet", columns=["doc_id", "title"]).to_pydict().values()))
    now = dict(zip(ids["doc_id"].to_pylist(), ids["title"].to_pylist()))
    return {"since": builds.build_id(live), "added": len(now.keys() - before.keys()),
            "dropped": len(before.keys() - now.keys()),
            "retitled": sum(1 for doc, title in now.items() if doc in before and before[doc] != title)}


def publish_index(store: Store, home: str, built: vi.BuiltIndex, ids: pa.Table, bm25: BM25Index,
                  described: dict[str, Any], choose: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Write one build of the index at ``home`` beside the live one (FAISS, ids, BM25, the manifest: ``described`` plus
    the index's own facts, the served mode ``choose`` picks and every file's facts) and switch it in; (folder, mode)."""
    with builds.writing(store, home) as out:  # beside the live build; removed when it fails before the switch
        written = [store.write_bytes(f"{out}/index.faiss", vi.to_bytes(built.index)), store.write_table(f"{out}/ids.parquet", ids)]
        written += [store.write_bytes(f"{out}/bm25/{name}", data) for name, data in bm25.to_files().items()]
        manifest = {**described, "count": built.count, "index_type": built.kind, "params": built.params,
                    "build_seconds": round(built.build_seconds, 3), "bm25": bm25.describe()}
        choice = choose(manifest)
        store.write_json(f"{out}/manifest.json", {**manifest, "search": choice, "files": file_facts(store, out, written)})
        builds.publish(store, home, out)
    return out, choice


def _describe(params: dict[str, Any]) -> str:
    if "nprobe" not in params:
        return ""
    return f"(nlist {params['nlist']}, nprobe {params['nprobe']}, tuned recall@10 {params['tune_recall_at_10']:.3f}) "
