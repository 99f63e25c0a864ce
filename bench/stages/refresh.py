"""Benchmark: the champion's index refreshed after 1 % of the catalogue changed, with no training.

Reads the store of ``DEEPSENT_STORE`` (or ``--store``) after ``make run``: its latest catalogue day D and the
champion's index. Writes a delta for the day after D into ``landing/catalog/`` that changes ``--share`` (1 %) of the
live products: a third retitled (a word appended), a third retired, a third launched (new product ids with the
titles of retired ones and a word appended, so none is already encoded), ingests it (``deepsent ingest``'s function,
timed) and refreshes the index (``ServedIndex.build``, what ``deepsent index`` and the ``deepsent_index`` DAG run,
timed): seconds, titles encoded (only the changed ones should be) and the corpus's changes, to ``bench/results/
refresh.json``. The store keeps the refreshed catalogue and index (run it on a store you may change).

With ``--scale N`` it then does the same on a catalogue of N products (copies of the real one, their vectors
stored as the encode stage would have: :mod:`bench.stages.refresh_scale`), under ``bench/refresh-scaled/`` of the
store; the goal there is 3 minutes at a million titles.

    .venv/bin/python -m bench.stages.refresh [--share 0.01] [--scale 1000000] [--out PATH]
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import RESULTS, write_results

DEFAULT_OUT = RESULTS / "refresh.json"
GOAL_S = 30.0
#: At 10^6 titles (``--scale 1000000``).
SCALED_GOAL_S = 180.0


def changed_catalogue(products: list[tuple[str, str]], share: float, seed: int) -> tuple[str, dict[str, int]]:
    """A delta CSV changing ``share`` of ``products`` (retitled, retired, launched in equal parts) and its counts."""
    rng = np.random.default_rng(seed)
    picked = [products[i] for i in rng.permutation(len(products))[: max(3, int(len(products) * share))]]
    third = len(picked) // 3
    retitled, retired = picked[:third], picked[third : 2 * third]
    launched = [(f"{pid}-relaunch", title) for pid, title in picked[2 * third :]]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["product_id", "title", "op"])
    writer.writerows([pid, f"{title} refreshed", "upsert"] for pid, title in retitled + launched)
    writer.writerows([pid, "", "retire"] for pid, _ in retired)
    return out.getvalue(), {"retitled": len(retitled), "retired": len(retired), "launched": len(launched)}


def refresh_once(settings: Any, model_uri: str, share: float, seed: int) -> dict[str, Any]:
    """Change ``share`` of the latest catalogue in a delta for the next day, ingest it and refresh the index (both
    timed); the figures of one refresh."""
    from encoders.search.served_index import ServedIndex
    from pipeline.storage.store import Store
    from pipeline.ingest.catalog.days import latest_catalog
    from pipeline.ingest.ingest import ingest_dates

    store = Store.from_settings(settings)
    found = latest_catalog(store)
    if found is None:
        raise SystemExit(f"{store.uri()}: no catalogue; run make run first")
    path, products = found
    day = dt.date.fromisoformat(path.split("dt=")[1].split("/")[0]) + dt.timedelta(days=1)
    delta, asked = changed_catalogue(products, share, seed)
    store.write_bytes(f"landing/catalog/dt={day.isoformat()}/delta.csv", delta.encode())
    began = time.perf_counter()
    ingested = ingest_dates(settings, [day])["catalog"][day.isoformat()]
    ingest_s = time.perf_counter() - began
    began = time.perf_counter()
    refreshed = ServedIndex.build(settings, model_uri)
    refresh_s = time.perf_counter() - began
    return {"catalogue_before": len(products), "share": share, "day": day.isoformat(), "asked": asked,
            "ingested": {k: ingested[k] for k in ("launches", "edits", "retirements", "products")},
            "ingest_s": round(ingest_s, 2), "refresh_s": round(refresh_s, 2), "encoded": refreshed.encoded,
            "titles": refreshed.count, "refresh": refreshed.refresh, "index_type": refreshed.index_type,
            "seconds": refreshed.seconds,
            "only_changed_encoded": 0 < refreshed.encoded <= ingested["launches"] + ingested["edits"]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON."""
    from bench.stages.refresh_scale import scaled_store
    from encoders.model.ranker_registry import CHAMPION_URI
    from pipeline.core.config import Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=os.environ.get("DEEPSENT_STORE"))
    parser.add_argument("--model-uri", default=CHAMPION_URI)
    parser.add_argument("--share", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", type=int, nargs="*", default=[], help="also refresh catalogues of these sizes")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings = Settings.from_env(**({"store": args.store} if args.store else {}))
    result: dict[str, Any] = {"benchmark": "refresh", "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
                              "model_uri": args.model_uri,
                              **refresh_once(settings, args.model_uri, args.share, args.seed),
                              "goal": {"refresh_s": GOAL_S, "scaled_refresh_s": SCALED_GOAL_S}, "scaled": []}
    result["goal_met"] = result["refresh_s"] <= GOAL_S and result["only_changed_encoded"]
    for size in args.scale:
        root = f"{settings.store}/bench/refresh-scaled"
        scaled, took = scaled_store(settings, args.model_uri, size, root, dt.date.fromisoformat(result["day"]),
                                    args.seed)
        run = {"size": size, "setup": took, **refresh_once(scaled, args.model_uri, args.share, args.seed)}
        run["goal_met"] = run["refresh_s"] <= SCALED_GOAL_S and run["only_changed_encoded"]
        result["scaled"].append(run)
        print(run, flush=True)
    print(result)
    write_results(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
