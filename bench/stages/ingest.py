"""Benchmark: ingestion rows/s per core against a bare ``json.loads`` loop over the same files.

For each ``--days`` size, the click simulator writes that many JSONL days (default parameters,
~14,500 rows a day) into a scratch store (not timed). Then ``--repeat`` rounds, each timing over
the same files, one after the other so the VM's slow spells hit all alike:

* the floor: one process reads every landing file, splits it into lines and ``json.loads`` each
  line (a failing line caught and counted) — what any Python ingestion costs before it checks a
  field (``json_loads_floor_rows_per_s``);
* ``ingest_dates`` with the vectorised engine on a running LocalCluster of each ``--workers``
  count (started by :func:`pipeline.runtime.dask_cluster.dask_client` before the clock starts;
  ``ingest_dates`` connects to it by address, submits every file and date, and waits for the
  outputs): ``rows_per_s`` = rows read / wall seconds, ``rows_per_s_per_core`` = that / workers;
* the per-line reference engine the same way, in the first round only and on the first worker
  count (it is what the issue calls "today");
* once, the CPU cost per row of each step of the vectorised path on the first file, in the
  driver without Dask (``steps_in_process``), beside ``json.loads`` of the same file: where the
  time goes;
* once, ``build_pairs`` over the ingested clicks (``pairs_stage``: clicks rows read per second, one
  process), and the simulated impressions (search result pages), so rows per impression is measured.

Besides wall time, the CPU seconds of the worker processes and of the driver are measured
(``rows_per_cpu_s``): on a shared 2-core machine wall time also counts other people's work, CPU
time does not. Medians over the rounds are reported, with every round's figure and the load
average around the run; the ratio to the floor is of figures from the same round. Writes JSON
(default ``bench/results/ingest.json``).

    .venv/bin/python -m bench.stages.ingest [--days 10 120] [--workers 1 2] [--repeat 3] [--searches-per-day N] [--out PATH]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import psutil

from bench import RESULTS, write_results
from pipeline.core.config import Settings
from pipeline.features.pairs import build_pairs
from pipeline.ingest.arrow_path import decode_jsonl, read_file_vectorised
from pipeline.ingest.assemble import assemble_partition
from pipeline.ingest.columns import check_columns
from pipeline.ingest.ingest import ingest_dates, landing_files
from pipeline.runtime.dask_cluster import dask_client
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store

DEFAULT_OUT = RESULTS / "ingest.json"
START = dt.date(2026, 1, 1)


def json_loads_floor(store: Store, paths: Sequence[str]) -> dict[str, float]:
    """Rows per second of reading the files and ``json.loads`` of every line, in this process."""
    loads = json.loads
    wall, cpu, rows = time.perf_counter(), time.process_time(), 0
    for path in paths:
        for line in store.read_bytes(path).split(b"\n"):
            if line:
                rows += 1
                try:
                    loads(line)
                except ValueError:
                    pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"rows": rows, "seconds": round(wall, 4), "rows_per_s": round(rows / wall), "rows_per_cpu_s": round(rows / cpu)}


def step_costs(store: Store, path: str, day: dt.date, repeat: int = 3) -> dict[str, float]:
    """CPU microseconds per row of each step of the vectorised path on one file, in this process (no Dask).

    The best of ``repeat`` timings of: json.loads of every line (the floor, on the same file);
    decoding into columns; the column checks, normalisation and hashing; the whole file (with the
    per-line fallback); assembling and writing the date (dedupe, bots, Parquet, manifest).
    """
    data = store.read_bytes(path)
    decoded = decode_jsonl(data, path)
    steps: dict[str, Callable[[], Any]] = {
        "json_loads_floor": lambda: [_loads_or_none(line) for line in data.split(b"\n") if line],
        "decode_columns": lambda: decode_jsonl(data, path),
        "check_normalise_hash": lambda: check_columns(decoded.columns, path, day),
        "read_file_total": lambda: read_file_vectorised(data, path, day),
    }
    result = read_file_vectorised(data, path, day)
    steps["assemble_and_write"] = lambda: assemble_partition(store, day, [result])
    costs = {}
    for name, step in steps.items():
        best = float("inf")
        for _ in range(repeat):
            cpu = time.process_time()
            step()
            best = min(best, time.process_time() - cpu)
        costs[name] = round(best * 1e6 / result.rows_read, 3)
    return {"file": path, "rows": result.rows_read, "cpu_us_per_row": costs}


def _loads_or_none(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _workers_cpu(client: Any) -> float:
    """CPU seconds used so far by every worker process of the cluster."""
    return sum(client.run(lambda: psutil.Process().cpu_times().user + psutil.Process().cpu_times().system).values())


def time_ingest(settings: Settings, client: Any, dates: list[dt.date], engine: str, workers: int) -> dict[str, float]:
    """One ``ingest_dates`` call on the running cluster of ``client``: rows, seconds, rates."""
    on_cluster = settings.with_overrides(dask_address=client.scheduler.address)
    before = _workers_cpu(client), time.process_time()
    wall = time.perf_counter()
    result = ingest_dates(on_cluster, dates, engine=engine)
    wall = time.perf_counter() - wall
    cpu = _workers_cpu(client) - before[0] + time.process_time() - before[1]
    rows = result["rows_read"]
    return {"rows": rows, "seconds": round(wall, 4), "cpu_seconds": round(cpu, 4), "rows_per_s": round(rows / wall),
            "rows_per_s_per_core": round(rows / wall / workers), "rows_per_cpu_s": round(rows / cpu)}


def _median(runs: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(run[key] for run in runs), 3)


def time_pairs(settings: Settings) -> dict[str, Any]:
    """One ``build_pairs`` over the ingested clicks (one process: pairs is not distributed)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = build_pairs(settings)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = result["rows_read"]
    return {"rows": rows, "clicked_rows": result["clicked_rows"], "pairs": result["pairs"], "seconds": round(wall, 4),
            "rows_per_s": round(rows / wall), "rows_per_cpu_s": round(rows / cpu)}


def time_size(settings: Settings, days: int, workers: Sequence[int], repeat: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Every round at one size: the floor, then the vectorised engine on each cluster size; then pairs once."""
    store = Store.from_settings(settings)
    dates = [START + dt.timedelta(days=k) for k in range(days)]
    paths = [path for day in dates for path in landing_files(store, day)]
    floors: list[dict[str, float]] = []
    runs: dict[int, list[dict[str, float]]] = {w: [] for w in workers}
    per_line: dict[str, float] = {}
    for round_ in range(repeat):
        floors.append(json_loads_floor(store, paths))
        for count in workers:
            with dask_client(settings.with_overrides(dask_workers=count)) as client:
                if round_ == 0:
                    time_ingest(settings, client, dates[:2], "arrow", count)  # warm-up: imports on the workers
                runs[count].append(time_ingest(settings, client, dates, "arrow", count))
                if round_ == 0 and count == workers[0]:
                    per_line = time_ingest(settings, client, dates, "per-line", count)
            log(f"{days} days, round {round_ + 1}: floor {floors[-1]['rows_per_s']:,} rows/s; "
                f"{count} worker(s) {runs[count][-1]['rows_per_s_per_core']:,} rows/s per core")
    floor = _median(floors, "rows_per_s")
    at_size: dict[str, Any] = {
        "days": days, "files": len(paths), "rows": floors[0]["rows"],
        "json_loads_floor_rows_per_s": floor, "json_loads_floor_rows_per_cpu_s": _median(floors, "rows_per_cpu_s"),
        "json_loads_floor_rounds": floors, "per_line_engine": {"workers": workers[0], **per_line}, "workers": {},
    }
    for count, timed in runs.items():
        per_round = [run["rows_per_s_per_core"] / fl["rows_per_s"] for run, fl in zip(timed, floors)]
        at_size["workers"][str(count)] = {
            "rows_per_s": _median(timed, "rows_per_s"), "rows_per_s_per_core": _median(timed, "rows_per_s_per_core"),
            "rows_per_cpu_s": _median(timed, "rows_per_cpu_s"), "seconds": _median(timed, "seconds"),
            "per_core_vs_floor": {"median": round(statistics.median(per_round), 3), "per_round": [round(r, 3) for r in per_round]},
            "rounds": timed,
        }
    at_size["pairs_stage"] = time_pairs(settings)
    at_size["steps_in_process"] = step_costs(store, paths[0], dates[0])
    first = str(workers[0])
    at_size["vectorised_vs_per_line_same_workers"] = round(runs[workers[0]][0]["rows_per_s"] / per_line["rows_per_s"], 2)
    at_size["cpu_per_row_vs_floor"] = round(at_size["workers"][first]["rows_per_cpu_s"] / at_size["json_loads_floor_rows_per_cpu_s"], 3)
    return at_size


def run(days: Sequence[int], workers: Sequence[int], repeat: int, params: SimParams, scratch: str) -> dict[str, Any]:
    """Simulate and time each size; the JSON-ready results."""
    results: dict[str, Any] = {"cpus": os.cpu_count(), "workers": list(workers), "repeat": repeat, "engine": "arrow",
                               "format": "jsonl", "load_average_before": os.getloadavg(), "sizes": {}}
    for size in days:
        settings = Settings.from_env(store=f"{scratch}/days-{size}", data_dir=str(Settings.from_env().data_dir))
        simulated = simulate(settings, START, size, params=params)
        results["sizes"][str(size)] = at_size = time_size(settings, size, workers, repeat, lambda line: print(line, file=sys.stderr, flush=True))
        at_size["impressions"] = simulated["searches"] + simulated["bot_searches"]  # search result pages shown
        at_size["rows_per_impression"] = round(at_size["rows"] / at_size["impressions"], 3)
    results["load_average_after"] = os.getloadavg()
    return results


def summary(results: dict[str, Any]) -> str:
    """One line per size and worker count."""
    lines = []
    for size, at_size in results["sizes"].items():
        for count, timed in at_size["workers"].items():
            lines.append(f"{size} days ({at_size['rows']:,} rows), {count} worker(s): {timed['rows_per_s_per_core']:,.0f} rows/s per core "
                         f"vs json.loads floor {at_size['json_loads_floor_rows_per_s']:,.0f} "
                         f"(x{timed['per_core_vs_floor']['median']}); per CPU second {timed['rows_per_cpu_s']:,.0f} "
                         f"vs {at_size['json_loads_floor_rows_per_cpu_s']:,.0f}")
        per_line = at_size["per_line_engine"]
        lines.append(f"{size} days: per-line engine {per_line['rows_per_s_per_core']:,} rows/s per core on {per_line['workers']} "
                     f"worker(s); vectorised x{at_size['vectorised_vs_per_line_same_workers']} of it")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the rates and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, nargs="+", default=[10, 120], help="simulated days per size")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="LocalCluster sizes")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians reported)")
    parser.add_argument("--searches-per-day", type=int, default=SimParams.searches_per_day, help="simulator searches a day")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    params = SimParams(searches_per_day=args.searches_per_day)
    with tempfile.TemporaryDirectory(prefix="deepsent-bench-ingest-") as scratch:
        results = run(args.days, args.workers, args.repeat, params, scratch)
    print(summary(results))
    write_results(args.out, results, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
