"""Benchmark: vector index build and search latency, exact vs approximate (IVF, HNSW), at the real corpus size and at 1M.

Corpus vectors: the title vectors of ``--model-uri`` (default ``DEEPSENT_BENCH_MODEL_URI``, else the champion,
``models:/deepsent-ranker@champion``) read from the vector store, ``vectors/``, of the store named by ``DEEPSENT_STORE`` (MLflow from
``MLFLOW_TRACKING_URI``), as ``deepsent index`` reads them: every corpus title's vector
(``pipeline.ingest.catalog.corpus.corpus_titles``; a title no stage encoded yet is encoded and stored first, so run it after
the chain's encode stage), with the dev set's judged queries through the same store as real queries; else (no
store, or a store without a champion and no ``--model-uri``) ``--base`` random unit vectors of dimension 96 (the
LSTM's ncell; default as many as the real corpus has titles, 48,097). A scaled corpus of N vectors repeats those
vectors, each copy moved by seeded noise of length about ``--noise`` (0.1) and renormalised. Perturbed queries are
corpus rows moved by the same noise.

Tuning (``tuned_on`` per index): with a store and ``--model-uri``, both approximate indexes are tuned on the model's embedded training
click queries, unit rows (``corpus_index.training_query_vectors``: up to 1,000 distinct queries of
``pairs/train.parquet``, the set ``deepsent index`` tunes on; never a judged query), at every size, the
scaled one included. Without a model: IVF on held-out titles, HNSW on 1,000 perturbed titles. IVF is
``encoders.search.vector_index``'s, nprobe the smallest (doubled, then bisected) reaching recall@10 >= 0.97
(``vi.TUNE_RECALL``, a margin above the 0.95 goal) on the tuning set; HNSW is ``IndexHNSWFlat``, inner
product, M = ``--hnsw-m``, efSearch the smallest of 10 * 2^k reaching it (at most 5,120).

Measured per size and index (``exact``: IndexFlatIP): build seconds; memory: peak resident growth
during the build, serialised size and bytes per vector; search latency p50/p99 per query one at a
time (``--single`` calls, 1 FAISS thread: a server answers concurrent queries on a thread each), on
the real queries when there are (cycled when fewer; ``single_on``), else on perturbed, and in batches of
100 on the perturbed queries (2 threads); recall@10 against exact per query set. Builds use 2 FAISS
threads; OpenMP waits passively, as under the CLI. ``goal`` per approximate index: single p99 < 10 ms
and recall@10 >= 0.95 on the held-out set ``goal_on`` (real queries when there are, else perturbed).

    .venv/bin/python -m bench.search.index [--model-uri URI] [--sizes real 1000000] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as deepsent.cli sets it; before faiss loads OpenMP

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from bench import RESULTS  # noqa: E402
from bench.stages.embed_memory import PeakRss  # noqa: E402
from encoders.search import vector_index as vi  # noqa: E402
from encoders.search.vectors import unit  # noqa: E402

DEFAULT_OUT = RESULTS / "search.json"
DIM, REAL_TITLES, PART_ROWS, MIB, K = 96, 48_097, 50_000, 2**20, 10
GOAL_P99_MS, GOAL_RECALL = 10.0, vi.TARGET_RECALL


def stored_vectors(model_uri: str | None) -> tuple[np.ndarray, np.ndarray | None, str] | None:
    """(titles, dev queries, source) of ``model_uri`` (None: the champion) as unit rows, from DEEPSENT_STORE's vector
    store; None without a store, or with neither a model URI nor a champion (see the module docstring)."""
    if not os.environ.get("DEEPSENT_STORE"):
        return None
    from encoders.model.loading import load_encoder
    from encoders.model.ranker_registry import CHAMPION_URI
    from encoders.model.vector_store import StoredEncoder
    from encoders.search.corpus_index import resolve_version
    from encoders.search.embed import judged_queries
    from pipeline.ingest.catalog.corpus import corpus_titles
    from pipeline.core.config import Settings
    from pipeline.core.errors import ConfigError
    from pipeline.storage.store import Store

    settings = Settings.from_env()
    store, uri = Store.from_settings(settings), model_uri or CHAMPION_URI
    try:
        run_id = resolve_version(settings, uri)[1]
    except ConfigError:
        if model_uri:
            raise
        return None  # no champion: random vectors
    encoder = StoredEncoder(load_encoder(uri, settings), store)
    titles = encoder.encode([title for _, title in corpus_titles(settings, store)[0]], "doc")
    queries = encoder.encode(judged_queries([settings.dev_judgments]), "query")
    return unit(titles), (unit(queries) if len(queries) else None), f"{store.uri('vectors')} of {uri} (run {run_id})"


def training_vectors(model_uri: str) -> np.ndarray | None:
    """The model's embedded training click queries (None without ``pairs/train.parquet``)."""
    from encoders.search.corpus_index import training_query_vectors
    from pipeline.core.config import Settings
    from pipeline.core.defaults import SEED
    from pipeline.storage.store import Store

    settings = Settings.from_env()
    return training_query_vectors(settings, Store.from_settings(settings), model_uri, SEED)


def tuning_queries(corpus: np.ndarray, training: np.ndarray | None, noise: float, seed: int
                   ) -> dict[str, tuple[np.ndarray | None, str]]:
    """Per approximate index, its tuning vectors and their name: ``training`` as unit rows, else held-out titles
    for IVF (None: ``vi.build`` samples them) and 1,000 perturbed titles for HNSW."""
    if training is not None:
        tune = unit(training)
        return {"ivf": (tune, f"training click queries ({len(tune)})"), "hnsw": (tune, f"training click queries ({len(tune)})")}
    rows = np.random.default_rng(seed).integers(0, len(corpus), vi.TUNE_QUERIES)
    return {"ivf": (None, "held-out titles"), "hnsw": (perturbed(corpus, rows, noise, seed), "perturbed titles")}


def perturbed(base: np.ndarray, rows: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Rows of ``base`` moved by seeded Gaussian noise of length about ``noise``, renormalised."""
    rng = np.random.default_rng(seed)
    out = base[rows] + (noise / np.sqrt(base.shape[1])) * rng.standard_normal((len(rows), base.shape[1])).astype(np.float32)
    return unit(out)


def latencies_ms(index: Any, queries: np.ndarray, batch: int, threads: int) -> dict[str, float]:
    """p50/p99 milliseconds per query, searching ``batch`` queries per call on ``threads`` FAISS threads."""
    faiss.omp_set_num_threads(threads)
    per_query = []
    for start in range(0, len(queries) - batch + 1, batch):
        began = time.perf_counter()
        index.search(queries[start : start + batch], K)
        per_query.append((time.perf_counter() - began) * 1000 / batch)
    faiss.omp_set_num_threads(2)
    return {"p50_ms": float(np.percentile(per_query, 50)), "p99_ms": float(np.percentile(per_query, 99)),
            "calls": len(per_query), "threads": threads}


def exact_top(corpus: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact top-K rows of ``queries`` (brute force, FAISS knn)."""
    return faiss.knn(queries, corpus, K, metric=faiss.METRIC_INNER_PRODUCT)[1]


def build_hnsw(corpus: np.ndarray, m: int, ef_construction: int, tune: np.ndarray, tune_truth: np.ndarray) -> vi.BuiltIndex:
    """IndexHNSWFlat (inner product) over ``corpus``; efSearch = smallest power of two reaching the target recall on ``tune``."""
    began = time.perf_counter()
    index = faiss.IndexHNSWFlat(corpus.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    for start in range(0, len(corpus), PART_ROWS):
        index.add(corpus[start : start + PART_ROWS])
    built_s = time.perf_counter() - began
    ef, recall = K, 0.0
    while True:
        index.hnsw.efSearch = ef
        recall = vi.recall_at_k(index.search(tune, K)[1], tune_truth)
        if recall >= vi.TUNE_RECALL or ef >= 4096:
            break
        ef *= 2
    params = {"metric": "inner_product", "M": m, "efConstruction": ef_construction, "efSearch": ef,
              "tune_queries": len(tune), "tune_recall_at_10": recall, "insert_seconds": built_s}
    return vi.BuiltIndex(index, index.ntotal, corpus.shape[1], "IndexHNSWFlat", params, time.perf_counter() - began)


def measure(corpus: np.ndarray, query_sets: dict[str, np.ndarray], tune: dict[str, tuple[np.ndarray | None, str]], label: str,
            args: argparse.Namespace) -> dict[str, Any]:
    """Exact, IVF and HNSW index of ``corpus``: build, memory, latency, recall@10 against exact per query set."""
    held_out = "real_queries" if "real_queries" in query_sets else "perturbed"
    out: dict[str, Any] = {"corpus": label, "vectors": len(corpus), "dim": corpus.shape[1], "indexes": {},
                           "query_sets": {name: len(q) for name, q in query_sets.items()}, "goal_on": held_out}
    truth = {name: exact_top(corpus, q) for name, q in query_sets.items()}
    parts, (ivf_tune, _), (hnsw_tune, _) = vi.chunks(corpus, PART_ROWS), tune["ivf"], tune["hnsw"]
    builders = {
        "exact": lambda: vi.build(parts, len(corpus), corpus.shape[1], exact_max=len(corpus)),
        "ivf": lambda: vi.build(parts, len(corpus), corpus.shape[1], 0, 0, ivf_tune),
        "hnsw": lambda: build_hnsw(corpus, args.hnsw_m, args.hnsw_ef_construction, hnsw_tune, exact_top(corpus, hnsw_tune)),
    }
    single = query_sets[held_out][np.arange(args.single) % len(query_sets[held_out])]  # cycled when fewer
    for name in args.indexes:
        before = psutil.Process().memory_info().rss
        with PeakRss() as peak:
            built = builders[name]()
        size = len(vi.to_bytes(built.index))
        entry = {"type": built.kind, "params": built.params, "build_s": built.build_seconds,
                 **({"tuned_on": tune[name][1]} if name in tune else {}),
                 "peak_growth_mib": (peak.peak - before) / MIB, "index_mib": size / MIB, "bytes_per_vector": size / len(corpus),
                 "single": latencies_ms(built.index, single, 1, threads=1), "single_on": held_out,
                 "batch_100": latencies_ms(built.index, query_sets["perturbed"], 100, threads=2),
                 "recall_at_10": {qs: vi.recall_at_k(built.index.search(q, K)[1], truth[qs]) for qs, q in query_sets.items()}}
        out["indexes"][name] = entry
        recalls = ", ".join(f"{qs} {r:.4f}" for qs, r in entry["recall_at_10"].items())
        knobs = json.dumps({k: v for k, v in built.params.items() if k in ("nlist", "nprobe", "M", "efSearch")})
        print(f"{label} n={len(corpus):,} {name} ({built.kind} {knobs}, tuned on {entry.get('tuned_on', '-')}): "
              f"build {built.build_seconds:.1f}s, +{entry['peak_growth_mib']:.0f} MiB, index {entry['index_mib']:.0f} MiB "
              f"({entry['bytes_per_vector']:.0f} B/vector), single ({held_out}) p50 {entry['single']['p50_ms']:.3f} / "
              f"p99 {entry['single']['p99_ms']:.3f} ms, batch p50 {entry['batch_100']['p50_ms']:.4f} / "
              f"p99 {entry['batch_100']['p99_ms']:.4f} ms per query, recall@10 {recalls}", flush=True)
        del built
    out["goal"] = {name: bool(e["single"]["p99_ms"] < GOAL_P99_MS and e["recall_at_10"][held_out] >= GOAL_RECALL)
                   for name, e in out["indexes"].items() if name != "exact"}
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The benchmark's flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-uri", default=os.environ.get("DEEPSENT_BENCH_MODEL_URI") or None,
                        help="index this model's stored title vectors and tune on its training click queries "
                        "(default: the champion's vectors, tuned on titles; needs DEEPSENT_STORE)")
    parser.add_argument("--sizes", nargs="+", default=["real", "1000000"], help="'real' and/or vector counts")
    parser.add_argument("--indexes", nargs="+", default=["exact", "ivf", "hnsw"], choices=["exact", "ivf", "hnsw"])
    parser.add_argument("--noise", type=float, default=0.1, help="length of the seeded perturbation (default 0.1)")
    parser.add_argument("--queries", type=int, default=2000, help="perturbed benchmark queries (default 2000)")
    parser.add_argument("--single", type=int, default=500, help="one-at-a-time calls timed (default 500)")
    parser.add_argument("--base", type=int, default=REAL_TITLES, help="random vectors without a store's vectors")
    parser.add_argument("--hnsw-m", type=int, default=32, help="HNSW links per node (default 32)")
    parser.add_argument("--hnsw-ef-construction", type=int, default=64, help="HNSW build beam (default 64)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.model_uri and not os.environ.get("DEEPSENT_STORE"):
        parser.error("--model-uri needs DEEPSENT_STORE (the store holding its vectors and pairs/train.parquet)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sizes asked for and write the JSON."""
    args = parse_args(argv)
    faiss.omp_set_num_threads(2)
    training = training_vectors(args.model_uri) if args.model_uri else None
    stored = stored_vectors(args.model_uri)
    if stored is None:
        rng = np.random.default_rng(0)
        base, real_queries = unit(rng.standard_normal((args.base, DIM)).astype(np.float32)), None
        source = f"random unit vectors, dim {DIM}"
    else:
        base, real_queries, source = stored
    runs = []
    for size in args.sizes:
        n = len(base) if size == "real" else int(size)
        corpus = base if n == len(base) else perturbed(base, np.arange(n) % len(base), args.noise, seed=1)
        rows = np.random.default_rng(2).integers(0, n, args.queries)
        query_sets = {"perturbed": perturbed(corpus, rows, args.noise, seed=3)}
        if real_queries is not None:
            query_sets["real_queries"] = real_queries
        tune = tuning_queries(corpus, training, args.noise, seed=4)  # never a measured query
        runs.append(measure(corpus, query_sets, tune, "real" if size == "real" else "scaled", args))
        del corpus
    result = {"benchmark": "search", "source": source, "model_uri": args.model_uri, "noise": args.noise, "threads": 2,
              "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0], "faiss": faiss.__version__, "exact_max": vi.EXACT_MAX,
              "goal": {"p99_single_ms": GOAL_P99_MS, "recall_at_10": GOAL_RECALL}, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
