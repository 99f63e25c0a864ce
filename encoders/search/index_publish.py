"""What one build of a model's corpus index writes, how it is published, and which build is live: the mechanics
behind :class:`~encoders.search.served_index.ServedIndex` (``build``, ``publish``, ``live_build``), its only caller.

A build (``deepsent index``, the chain's index stage, the index DAG) reads every corpus title's vector from the
store's vectors of the model (:mod:`encoders.model.vector_store`: the encode stage stored them; only titles no stage
encoded yet are encoded) into a FAISS index (:mod:`encoders.search.vector_index`: exact ``IndexFlatIP`` when small,
IVF over compact codes above) and a BM25 index (:func:`gather`), then writes them beside the live build under
``builds/<build id>/`` with its manifest, the served mode chosen on the decision's queries, and switches it in by
rewriting ``current.json`` (:func:`write_build`, :func:`publish_index`; the folder mechanics:
:mod:`encoders.search.index_builds`). Where an index lives: :mod:`encoders.search.corpus_index`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa

from encoders.model.tracking import model_uri_of
from encoders.search import index_builds as builds
from encoders.search import served
from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from encoders.search.corpus_index import INDEXES_ROOT, index_root, resolve_version, tuning_vectors
from encoders.search.embed import CHUNK_ROWS
from encoders.search.results import IndexResult
from pipeline.ingest.catalog.corpus import corpus_titles
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.features.click_lists import held_out_clicks
from pipeline.storage.artifacts import file_facts
from pipeline.storage.store import Store

if TYPE_CHECKING:  # named without importing torch at import time
    from encoders.model.vector_store import StoredEncoder

#: The mode search of a build being written, given its manifest and the decision's queries (what its served mode is
#: chosen by: :meth:`~encoders.search.served_index.ServedIndex.mode_search` of the build).
ModeSearch = Callable[[dict[str, Any], list[str]], served.Search]


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


@dataclass
class Gathered:
    """One build before it is written: the model's vectors in FAISS and BM25, and where and what it describes."""

    store: Store
    clock: Clock
    model_uri: str
    version: str
    run_id: str
    encoder: StoredEncoder
    encoded: int  # titles encoded for this index (an ensemble's: by the part that encoded the most)
    built: vi.BuiltIndex
    ids: pa.Table  # row -> doc_id, title
    bm25: BM25Index
    home: str
    described: dict[str, Any]  # the manifest's facts of the model, the titles and the vectors read


def gather(settings: Settings, model_uri: str, seed: int, exact_max: int | None) -> Gathered:
    """Every corpus title's vector of ``model_uri`` (read from the store's vectors, encoded only where missing) in a
    FAISS index (built by ``seed``, exact up to ``exact_max`` titles) and BM25."""
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
    described = {"model_uri": model_uri_of(model_uri), "run_id": run_id, "version": version, "model": encoder.label,
                 "model_type": encoder.model_type, "dim": dim, "titles": {"rows": count, "sources": sources},
                 "vectors": [part_key(part, encoder.encoder) for part in encoder.parts("doc")]}
    return Gathered(store, clock, model_uri, version, run_id, encoder, encoded, built, ids, bm25,
                    index_root(encoder.model_type, version, model_uri), described)


def write_build(build: Gathered, mode_search: ModeSearch, seed: int,
                decision: served.DecisionQueries | None = None) -> IndexResult:
    """Publish ``build`` with its served mode chosen on ``decision``'s queries (default: the held-out clicks) by
    ``mode_search``, and say what was published."""
    store, clock, built, ids = build.store, build.clock, build.built, build.ids

    def choose(manifest: dict[str, Any]) -> dict[str, Any]:
        asked = (decision or served.DecisionQueries.of_clicks(held_out_clicks(store))).within(
            set(ids["doc_id"].to_pylist()))
        chosen = served.choose_default_mode(mode_search(manifest, list(asked.relevant)), asked, seed=seed)
        clock.lap("files_and_mode_choice_s")
        return chosen

    described = {**build.described, "refresh": changes_since(store, build.home, ids)}
    out, choice = publish_index(store, build.home, built, ids, build.bm25, described, choose)
    refresh = described["refresh"]
    clock.lap("publish_s")
    label, version, encoded = build.encoder.label, build.version, build.encoded
    summary = (f"indexed {built.count:,} titles of {label} (version {version}; {encoded:,} titles "
               f"encoded now, the rest read from the store) with {built.kind} {_describe(built.params)}and BM25 in "
               f"{built.build_seconds:.1f}s -> {store.uri(out)} (now served); default search "
               f"mode {choice['default_mode']} (linear weight {choice.get('linear_weight', 0.5)}; NDCG@10 on "
               f"{choice['queries']} queries of {choice['chosen_on']}: "
               + (", ".join(f"{m} {v:.3f}" for m, v in choice["ndcg_at_10"].items()) or "none")
               + (f"; {choice['why']}" if choice.get("why") else "") + ")"
               + (f"; since the build it replaces: {refresh['added']:,} products added, {refresh['dropped']:,} "
                  f"dropped, {refresh['retitled']:,} retitled" if refresh["since"] else ""))
    return IndexResult(root=store.uri(build.home), build=store.uri(out), manifest=store.uri(f"{out}/manifest.json"),
                       model_uri=model_uri_of(build.model_uri), count=built.count, dim=described["dim"],
                       index_type=built.kind, params=built.params, version=version, run_id=build.run_id,
                       encoded=encoded, build_seconds=built.build_seconds, search=choice, refresh=refresh,
                       seconds=clock.laps, summary=summary)


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


def live_folder(store: Store, model_uri: str, version: str, model_types: list[str] | None = None) -> str | None:
    """The live build folder of ``model_uri``'s index at ``version`` (None: never indexed), looked for under each of
    ``model_types``' folders (None: every model type's, as a version's type is not known before its model is loaded)."""
    rebuild = f"deepsent index --model-uri {model_uri}"
    for model_type in store.list_dirs(INDEXES_ROOT) if model_types is None else model_types:
        folder = builds.live_folder(store, index_root(model_type, version, model_uri), rebuild)
        if folder is not None:
            return folder
    return None


def _describe(params: dict[str, Any]) -> str:
    if "nprobe" not in params:
        return ""
    return f"(nlist {params['nlist']}, nprobe {params['nprobe']}, tuned recall@10 {params['tune_recall_at_10']:.3f}) "
