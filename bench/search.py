"""Benchmark: vector index build and search latency, exact vs approximate, at the real corpus size and at 1M.

Corpus vectors: the title vectors of ``embeddings/<DEEPSENT_BENCH_EMBEDDINGS>/titles`` (default:
the last folder by name) of the store named by ``DEEPSENT_STORE`` when there is one, else random unit vectors of dimension 96 (the LSTM's ncell)
as many as the real corpus has titles (48,097). The 1M corpus repeats those vectors, each copy
moved by seeded noise of length about ``--noise`` (0.1) and renormalised. Queries are held-out
corpus rows moved by the same noise. For each size and index (``exact``: IndexFlatIP,
``approximate``: the IVF index of ``encoders.vector_index``, nprobe tuned to recall@10 >= 0.95):
build seconds, peak resident memory growth during the build, search latency p50/p99 per query
one at a time (500 calls, 1 FAISS thread: a server answers concurrent queries on a thread each,
and splitting one query over 2 busy cores cost more than it saved here) and in batches of 100
(2 threads), and the approximate index's recall@10 against exact. Builds use 2 FAISS threads;
OpenMP waits passively, as under the CLI. Writes ``bench/results/search.json``.

    PYTHONPATH=. .venv/bin/python bench/search.py [--sizes real 1000000] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as deepsent.cli sets it; before faiss loads OpenMP

import faiss  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from embed_memory import PeakRss  # noqa: E402

from encoders import vector_index as vi  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "search.json"
DIM, REAL_TITLES, PART_ROWS, MIB = 96, 48_097, 50_000, 2**20


def real_vectors() -> tuple[np.ndarray, str]:
    """Stored title vectors of DEEPSENT_STORE (DEEPSENT_BENCH_EMBEDDINGS or the last folder), else random ones."""
    root = os.environ.get("DEEPSENT_STORE")
    if root:
        from encoders.index import EMBEDDINGS_ROOT, vectors_of
        from pipeline.store import Store

        store = Store(root)
        folders = [f for f in store.list_dirs(EMBEDDINGS_ROOT) if store.exists(f"{EMBEDDINGS_ROOT}/{f}/manifest.json")]
        if folders:
            folder = os.environ.get("DEEPSENT_BENCH_EMBEDDINGS") or folders[-1]
            dim = store.read_json(f"{EMBEDDINGS_ROOT}/{folder}/manifest.json")["dim"]
            parts = [vectors_of(t, dim) for _, t in store.iter_tables(f"{EMBEDDINGS_ROOT}/{folder}/titles", ["vector"])]
            return vi.unit(np.concatenate(parts)), f"{store.uri(EMBEDDINGS_ROOT)}/{folder}"
    rng = np.random.default_rng(0)
    return vi.unit(rng.standard_normal((REAL_TITLES, DIM)).astype(np.float32)), f"random unit vectors, dim {DIM}"


def perturbed(base: np.ndarray, rows: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Rows of ``base`` moved by seeded Gaussian noise of length about ``noise``, renormalised."""
    rng = np.random.default_rng(seed)
    out = base[rows] + (noise / np.sqrt(base.shape[1])) * rng.standard_normal((len(rows), base.shape[1])).astype(np.float32)
    return vi.unit(out)


def latencies_ms(index: Any, queries: np.ndarray, batch: int, threads: int) -> dict[str, float]:
    """p50/p99 milliseconds per query, searching ``batch`` queries per call on ``threads`` FAISS threads."""
    faiss.omp_set_num_threads(threads)
    per_query = []
    for start in range(0, len(queries) - batch + 1, batch):
        began = time.perf_counter()
        index.search(queries[start : start + batch], 10)
        per_query.append((time.perf_counter() - began) * 1000 / batch)
    faiss.omp_set_num_threads(2)
    return {"p50_ms": float(np.percentile(per_query, 50)), "p99_ms": float(np.percentile(per_query, 99)),
            "calls": len(per_query), "threads": threads}


def measure(corpus: np.ndarray, queries: np.ndarray, label: str) -> dict[str, Any]:
    """Exact and approximate index of ``corpus``: build, memory, latency, recall@10."""
    out: dict[str, Any] = {"corpus": label, "vectors": len(corpus), "dim": corpus.shape[1], "indexes": {}}
    found = {}
    for name, exact_max in (("exact", len(corpus)), ("approximate", 0)):
        with PeakRss() as peak:
            before = psutil.Process().memory_info().rss
            built = vi.build(vi.chunks(corpus, PART_ROWS), len(corpus), corpus.shape[1], seed=0, exact_max=exact_max)
        single = latencies_ms(built.index, queries[:500], 1, threads=1)
        batched = latencies_ms(built.index, queries, 100, threads=2)
        found[name] = built.index.search(queries, 10)[1]
        out["indexes"][name] = {"type": built.kind, "params": built.params, "build_s": built.build_seconds,
                                "peak_growth_mib": (peak.peak - before) / MIB,
                                "index_mib": len(vi.to_bytes(built.index)) / MIB, "single": single, "batch_100": batched}
        print(f"{label} n={len(corpus):,} {name} ({built.kind} {built.params.get('nprobe', '')}): "
              f"build {built.build_seconds:.1f}s, +{out['indexes'][name]['peak_growth_mib']:.0f} MiB, "
              f"single p50 {single['p50_ms']:.3f} / p99 {single['p99_ms']:.3f} ms, "
              f"batch p50 {batched['p50_ms']:.4f} / p99 {batched['p99_ms']:.4f} ms per query", flush=True)
        del built
    out["recall_at_10"] = vi.recall_at_k(found["approximate"], found["exact"])
    print(f"  approximate recall@10 vs exact on {len(queries)} queries: {out['recall_at_10']:.4f}", flush=True)
    return out


def main() -> None:
    """Run the sizes asked for and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["real", "1000000"], help="'real' and/or vector counts")
    parser.add_argument("--noise", type=float, default=0.1, help="length of the seeded perturbation (default 0.1)")
    parser.add_argument("--queries", type=int, default=2000, help="held-out queries (default 2000)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    faiss.omp_set_num_threads(2)
    base, source = real_vectors()
    runs = []
    for size in args.sizes:
        n = len(base) if size == "real" else int(size)
        corpus = base if n == len(base) else perturbed(base, np.arange(n) % len(base), args.noise, seed=1)
        rows = np.random.default_rng(2).integers(0, n, args.queries)
        queries = perturbed(corpus, rows, args.noise, seed=3)
        runs.append(measure(corpus, queries, "real" if size == "real" else "scaled"))
        del corpus
    result = {"benchmark": "search", "source": source, "noise": args.noise, "threads": 2, "cpus": os.cpu_count(),
              "faiss": faiss.__version__, "exact_max": vi.EXACT_MAX, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
