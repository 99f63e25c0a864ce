"""Benchmark: the served index at 10^7 titles, streamed (the corpus is never held whole): build time, memory,
p50/p99 per query in process and recall@10 against exact search on held-out queries.

The corpus is the champion's title vectors (``DEEPSENT_STORE``'s vector store, as :mod:`bench.search.index` reads
them) and copies of them, each moved by seeded noise of length about ``--noise`` and renormalised
(:func:`bench.search.scaled.copy_parts`), made part by part on every pass. The index is what ``deepsent index``
builds for that many titles (:func:`encoders.search.vector_index.build`: IVF over fp16 codes, nprobe tuned on the
model's training click queries). Measured: build seconds, the process's peak resident memory and its growth, the
index's code bytes, per-query latency one query at a time on one FAISS thread (as a server thread asks it) on the
dev set's judged queries (never tuned on; cycled to ``--single`` calls), and recall@10 against exact search over
the whole streamed corpus on those queries. Goal: p99 <= 20 ms, recall@10 >= 0.95, within the machine's memory.

    DEEPSENT_STORE=... .venv/bin/python -m bench.search.index_streamed [--size 10000000] [--out PATH]
"""
from __future__ import annotations

import argparse
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

from bench import RESULTS, write_results  # noqa: E402
from bench.search.index import latencies_ms, stored_vectors, training_vectors  # noqa: E402
from bench.search.scaled import copy_parts  # noqa: E402
from bench.stages.embed_memory import PeakRss  # noqa: E402
from encoders.search import vector_index as vi  # noqa: E402

DEFAULT_OUT = RESULTS / "search-streamed.json"
GIB, K = 2**30, 10
GOAL = {"p99_single_ms": 20.0, "recall_at_10": vi.TARGET_RECALL, "memory_gib": 24}


def exact_top(parts: vi.Parts, queries: np.ndarray) -> tuple[np.ndarray, float]:
    """The exact top-K rows of ``queries`` over every streamed part (merged part by part), and the seconds it took."""
    began, heap, first = time.perf_counter(), faiss.ResultHeap(len(queries), K, keep_max=True), 0
    for part in parts():
        scores, ids = faiss.knn(queries, part, min(K, len(part)), metric=faiss.METRIC_INNER_PRODUCT)
        heap.add_result(scores, np.where(ids >= 0, ids + first, -1))
        first += len(part)
    heap.finalize()
    return heap.I, time.perf_counter() - began


def code_bytes(index: Any) -> int:
    """The bytes an IVF index's lists hold (codes and ids), or a flat index's vectors."""
    if hasattr(index, "invlists"):
        return int(index.ntotal) * (int(index.code_size) + 8)
    return int(index.ntotal) * int(index.d) * 4


def measure(size: int, noise: float, single: int, model_uri: str | None) -> dict[str, Any]:
    """Build the served index over ``size`` streamed vectors and measure it (see the module docstring)."""
    stored = stored_vectors(model_uri)
    if stored is None or stored[1] is None:
        raise SystemExit("bench.search.index_streamed needs DEEPSENT_STORE with a champion and the dev set's queries")
    base, queries, source = stored
    tune = training_vectors(model_uri or "models:/deepsent-ranker@champion")
    parts = copy_parts(base, size, seed=7, noise=noise)
    process = psutil.Process()
    before = process.memory_info().rss
    print(f"building the served index over {size:,} streamed vectors ({len(base):,} real, dim {base.shape[1]}) ...",
          flush=True)
    with PeakRss() as peak:
        built = vi.build(parts, size, base.shape[1], tune_queries=tune)
    print(f"built {built.kind} {built.params.get('codes', '')} nlist {built.params.get('nlist')} nprobe "
          f"{built.params.get('nprobe')} in {built.build_seconds:.0f} s; exact answers ...", flush=True)
    truth, exact_seconds = exact_top(parts, queries)
    asked = queries[np.arange(single) % len(queries)]
    single_ms = latencies_ms(built.index, asked, 1, threads=1)
    recall = vi.recall_at_k(built.index.search(queries, K)[1], truth)
    out = {"vectors": size, "real_vectors": len(base), "dim": int(base.shape[1]), "source": source, "noise": noise,
           "type": built.kind, "params": built.params, "build_s": round(built.build_seconds, 1),
           "exact_search_s": round(exact_seconds, 1), "peak_rss_gib": round(peak.peak / GIB, 2),
           "peak_growth_gib": round((peak.peak - before) / GIB, 2), "index_gib": round(code_bytes(built.index) / GIB, 2),
           "machine_memory_gib": round(psutil.virtual_memory().total / GIB, 1), "single": single_ms,
           "single_on": f"the dev set's judged queries ({len(queries)}), cycled", "recall_at_10": round(recall, 4),
           "recall_on": "the dev set's judged queries against exact search over the whole corpus"}
    out["goal_met"] = bool(single_ms["p99_ms"] <= GOAL["p99_single_ms"] and recall >= GOAL["recall_at_10"]
                           and peak.peak / GIB < GOAL["memory_gib"])
    print(f"{size:,} vectors: build {out['build_s']} s, peak RSS {out['peak_rss_gib']} GiB, index "
          f"{out['index_gib']} GiB, single p50 {single_ms['p50_ms']:.2f} / p99 {single_ms['p99_ms']:.2f} ms, "
          f"recall@10 {recall:.4f} (goal met: {out['goal_met']})", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Measure one streamed size and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000, help="vectors in the corpus (default 10,000,000)")
    parser.add_argument("--noise", type=float, default=0.1, help="length of the seeded perturbation (default 0.1)")
    parser.add_argument("--single", type=int, default=500, help="one-at-a-time calls timed (default 500)")
    parser.add_argument("--model-uri", default=os.environ.get("DEEPSENT_BENCH_MODEL_URI") or None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not os.environ.get("DEEPSENT_STORE"):
        parser.error("needs DEEPSENT_STORE: a store after make run (the champion's vectors and click pairs)")
    faiss.omp_set_num_threads(2)
    began = time.perf_counter()
    run = measure(args.size, args.noise, args.single, args.model_uri)
    write_results(args.out, {"benchmark": "search-streamed", "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
                             "faiss": faiss.__version__, "goal": GOAL, "seconds": round(time.perf_counter() - began),
                             "runs": [run]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
