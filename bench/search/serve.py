"""Benchmark: ``deepsent serve`` end to end over loopback (HTTP, query encoding, search, JSON), and where the time goes.

Reads the store of ``DEEPSENT_STORE`` (or ``--store``; MLflow from ``MLFLOW_TRACKING_URI``, else the store's own
database) after ``make run``: the champion (``--model-uri``) and its published index. Queries are held-out click
queries (``pairs/valid.parquet``, a seeded sample; never a judged query), each sent as ``GET /search?q=...&k=10``
in the index's default mode.

1. **In process** (no HTTP): per query, one at a time, the milliseconds of encoding it and of searching it (both
   first stages and the mode's fusion), what a request costs the server at the least.
2. **Over HTTP**: the server started as a subprocess (``deepsent serve``), then for each ``--clients`` level, that
   many threads each with one keep-alive connection send queries back to back for ``--seconds``: queries/s,
   p50/p90/p99 latency, failed requests, the server's CPU milliseconds per query (its process's user + system
   time over the level) and the load generator's (this process, on the same 2 cores), and the server's batches over
   the level (``/metrics``: how many, their mean queries, the mean wait of a search for its batch).
3. **A swap under load** (``--swap``): while ``--swap-clients`` clients query, ``deepsent index`` publishes a new
   build of the champion's index; every answer must come back 200 from the old build or the new one.

4. **At scale** (``--scale 1000000``): the same over a corpus of that many titles: the champion's indexed vectors
   repeated, each copy moved by seeded noise of length about 0.1 and renormalised, its titles repeated with a word
   naming the copy (``lot3``); indexed as ``deepsent index`` would (IVF above 20,000 titles, nprobe tuned on the
   training click queries; BM25 over every title) and published under ``bench/serve-scaled/`` of the store (a copy
   of the MLflow database beside it, removed after the run), served in the champion's default mode.

    .venv/bin/python -m bench.search.serve [--clients 1 8 16] [--seconds 20] [--swap] [--scale N] [--out PATH]
        [--batch-wait-ms MS] [--batch-max N]   (passed to deepsent serve; default: its own)
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench import RESULTS, write_results
from bench.search.scaled import scaled_store

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

DEFAULT_OUT = RESULTS / "serve.json"
K = 10
GOAL = {"queries_per_s": 200, "clients": 8, "p99_ms": 50.0}


def held_out_queries(settings: Any, limit: int, seed: int = 7) -> list[str]:
    """Up to ``limit`` distinct held-out click queries of the store, a seeded sample."""
    from pipeline.features.click_lists import seeded_sample
    from pipeline.storage.store import Store

    store = Store.from_settings(settings)
    return seeded_sample(store.read_table("pairs/valid.parquet", columns=["query"])["query"].to_pylist(), seed, limit)


def in_process(settings: Any, model_uri: str, queries: list[str]) -> dict[str, Any]:
    """Per-query milliseconds of encoding and of searching in the default mode, the served object in process."""
    from encoders.search.served_index import ServedIndex

    began = time.perf_counter()
    index = ServedIndex.open(settings, model_uri)
    load_s = time.perf_counter() - began
    index.hits(queries[:1], K)  # warm: the first search compiles MiniLM for this process, as the server does before it serves
    encode_ms, search_ms = [], []
    for query in queries:
        t0 = time.perf_counter()
        vector = index.live_vectors([query])  # as the server encodes a query alone
        t1 = time.perf_counter()
        index.hits([query], K, None, vector)
        t2 = time.perf_counter()
        encode_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
    return {"load_s": round(load_s, 2), "titles": len(index.titles), "mode": index.default_mode,
            "version": index.version, "queries": len(queries), "encode_ms": percentiles(encode_ms),
            "search_ms": percentiles(search_ms)}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and the mean of ``values`` (milliseconds), rounded."""
    if not values:
        return {}
    return {f"p{q}": round(float(np.percentile(values, q)), 2) for q in (50, 90, 99)} | {
        "mean": round(float(np.mean(values)), 2)}


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(args: argparse.Namespace, port: int, store: str | None, env: dict[str, str]) -> subprocess.Popen:
    """``deepsent serve`` on loopback, ready (``/readyz`` 200) or the benchmark stops."""
    command = [sys.executable, "-m", "deepsent.cli", "serve", "--port", str(port), "--model-uri", args.model_uri,
               *(["--store", store] if store else []), *serve_flags(args)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(args.log, "w"), env=env)
    deadline = time.monotonic() + args.ready_timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"deepsent serve exited {server.returncode}; see {args.log}")
        try:
            if get(port, "/readyz")[0] == 200:
                return server
        except OSError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"deepsent serve was not ready in {args.ready_timeout} s; see {args.log}")


def serve_flags(args: argparse.Namespace) -> list[str]:
    """The batching flags given to ``deepsent serve`` (none: its defaults)."""
    given = (("--batch-wait-ms", args.batch_wait_ms), ("--batch-max", args.batch_max))
    return [text for flag, value in given if value is not None for text in (flag, str(value))]


#: The server's batch counters (``/metrics``): batches, their queries, the searches batched, their seconds waited.
BATCH_TOTALS = ("deepsent_serve_batch_queries_count", "deepsent_serve_batch_queries_sum",
                "deepsent_serve_batch_wait_seconds_count", "deepsent_serve_batch_wait_seconds_sum")


def batch_totals(port: int) -> np.ndarray:
    """The server's :data:`BATCH_TOTALS` so far (zeros for a server without them)."""
    found = dict(line.partition(" ")[::2] for line in get(port, "/metrics")[1].decode().splitlines())
    return np.array([float(found.get(name, 0)) for name in BATCH_TOTALS])


def get(port: int, path: str, connection: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    """(status, body) of one GET on loopback (``connection``: a keep-alive one to reuse)."""
    conn = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    if connection is None:
        conn.close()
    return response.status, body


def search_path(query: str) -> str:
    """The GET path of one query in the default mode."""
    return "/search?" + urllib.parse.urlencode({"q": query, "k": K})


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(port: int, queries: list[str], clients: int, seconds: float, server_pid: int,
         during: Any = None) -> dict[str, Any]:
    """``clients`` threads querying back to back for ``seconds`` (``during``: a callable run meanwhile, in this
    thread); latency, throughput, failures, which builds answered, and CPU per query of server and load generator."""
    stop, lock = threading.Event(), threading.Lock()
    latencies: list[float] = []
    statuses: Counter = Counter()
    builds: Counter = Counter()

    def client(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine, seen, answered = [], Counter(), Counter()
        i = offset
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                status, body = get(port, search_path(queries[i % len(queries)]), conn)
            except OSError as exc:
                status, body = type(exc).__name__, b""
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine.append((time.perf_counter() - t0) * 1000)
            seen[status] += 1
            if status == 200:
                answer = json.loads(body)
                answered[f"{answer.get('version')}/{answer.get('build')}"] += 1
            i += clients
        with lock:
            latencies.extend(mine)
            statuses.update(seen)
            builds.update(answered)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    totals = batch_totals(port)
    cpu0, self0, began = process_cpu_s(server_pid), _self_cpu_s(), time.perf_counter()
    for thread in threads:
        thread.start()
    if during is not None:
        during()
    else:
        time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    served, done = sum(statuses.values()), batch_totals(port) - totals
    return {"clients": clients, "seconds": round(elapsed, 1), "requests": served,
            "queries_per_s": round(served / elapsed, 1), "latency_ms": percentiles(latencies),
            "failed": served - statuses.get(200, 0), "statuses": {str(k): v for k, v in statuses.items()},
            "answered_by": dict(builds),
            "server_cpu_ms_per_query": round((process_cpu_s(server_pid) - cpu0) * 1000 / max(served, 1), 2),
            "loadgen_cpu_ms_per_query": round((_self_cpu_s() - self0) * 1000 / max(served, 1), 2),
            "batches": {"batches": int(done[0]), "mean_queries": round(done[1] / max(done[0], 1), 2),
                        "mean_wait_ms": round(done[3] * 1000 / max(done[2], 1), 2)},
            "load_avg_1m_after": round(os.getloadavg()[0], 2)}


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rebuild(args: argparse.Namespace) -> None:
    """``deepsent index`` of the champion: a new build published under the running server."""
    command = [sys.executable, "-m", "deepsent.cli", "index", "--model-uri", args.model_uri,
               *(["--store", args.store] if args.store else [])]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(args.after_swap)  # keep querying the new build a while


def measure(args: argparse.Namespace, settings: Any, queries: list[str], swap: bool) -> dict[str, Any]:
    """In-process costs, then the HTTP levels (and a swap under load) of the index of ``settings``' store."""
    result: dict[str, Any] = {"in_process": in_process(settings, args.model_uri, queries[: args.in_process])}
    print(json.dumps(result["in_process"]), flush=True)
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri}
    server = start_server(args, port, settings.store, env)
    try:
        for _ in range(50):  # warm: first requests pay lazy imports and allocations
            get(port, search_path(queries[0]))
        result["http"] = []
        for clients in args.clients:
            level = load(port, queries, clients, args.seconds, server.pid)
            print(json.dumps(level), flush=True)
            result["http"].append(level)
        if swap:
            result["swap"] = load(port, queries, args.swap_clients, 0, server.pid, during=lambda: rebuild(args))
            print(json.dumps(result["swap"]), flush=True)
        metrics = get(port, "/metrics")[1].decode()
        result["server_metrics_sample"] = [line for line in metrics.splitlines()
                                           if line.startswith("deepsent_") and "bucket" not in line][:40]
    finally:
        server.terminate()
        result["server_exit"] = server.wait(timeout=60)
    at_goal = next((lvl for lvl in result["http"] if lvl["clients"] == GOAL["clients"]), None)
    if at_goal:
        result["goal_met"] = (at_goal["queries_per_s"] >= GOAL["queries_per_s"]
                              and at_goal["latency_ms"]["p99"] <= GOAL["p99_ms"] and at_goal["failed"] == 0)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON."""
    import shutil

    from encoders.model.ranker_registry import CHAMPION_URI
    from pipeline.core.config import Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=os.environ.get("DEEPSENT_STORE"))
    parser.add_argument("--model-uri", default=CHAMPION_URI)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--in-process", type=int, default=300, help="queries timed in process")
    parser.add_argument("--swap", action="store_true", help="also publish a new build under 8 clients")
    parser.add_argument("--swap-clients", type=int, default=8)
    parser.add_argument("--after-swap", type=float, default=5.0)
    parser.add_argument("--scale", type=int, nargs="*", default=[], help="also measure at these corpus sizes")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--batch-wait-ms", type=float, help="deepsent serve's --batch-wait-ms (default: its own)")
    parser.add_argument("--batch-max", type=int, help="deepsent serve's --batch-max (default: its own)")
    parser.add_argument("--log", default="/tmp/deepsent-serve-bench.log")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings = Settings.from_env(**({"store": args.store} if args.store else {}))
    queries = held_out_queries(settings, args.queries)
    result: dict[str, Any] = {"benchmark": "serve", "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
                              "model_uri": args.model_uri, "k": K, "goal": GOAL, "queries": len(queries),
                              "serve_flags": serve_flags(args),
                              "query_source": "held-out click queries (pairs/valid.parquet)", "runs": []}
    result["runs"].append({"corpus": "real", **measure(args, settings, queries, args.swap)})
    for size in args.scale:
        root = f"{settings.store}/bench/serve-scaled"
        try:
            began = time.perf_counter()
            scaled = scaled_store(settings, args.model_uri, size, root)
            built_s = time.perf_counter() - began
            result["runs"].append({"corpus": f"scaled to {size:,}", "titles": size, "build_s": round(built_s, 1),
                                   **measure(args, scaled, queries, False)})
        finally:
            shutil.rmtree(root, ignore_errors=True)
    write_results(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
