"""The main job, in process: the chain (:data:`deepsent.chain.CHAIN`) of one profile, stage by stage.

simulate -> ingest -> pairs -> mine -> featurize -> train (every grid point) -> ensemble -> ship -> encode
-> promote -> index -> search -> compare -> publish, each stage the function the retrain DAG runs as a task
(:mod:`deepsent.stages`). After training, the best LSTM-RNN is joined with MiniLM, and the model to
ship is decided on the decision set (the judged gate set, else the held-out click lists: ``eval.decisions``): a
trained candidate only when it beats MiniLM off the shelf by more than the noise, else MiniLM itself
(``eval.shipping``). That model is gated against the ``champion`` of ``deepsent-ranker`` on the same set
(``eval.promotion.promote``); the reported judged set is never a decision's input.

Two profiles (:mod:`deepsent.profiles`). ``quick`` (README command 1) trains the LSTM-RNN and DSSM on
30 simulated days, builds the ensemble and compares them with every baseline in about ten minutes on 2
cores. ``full`` reproduces the whole Table IV grid (DSSM, CLSM win 1/3/5, RNN, LSTM ncell 32/64/96,
n = 2/4/6/8, BiLSTM, PLSA with 500 topics, the longer skip-thought training) and fine-tunes MiniLM for
one epoch; about two hours on a 2-core CPU without the MiniLM epoch (docs/RESULTS.md).
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any, Callable, TypeVar

from deepsent.chain import CHAIN, Stage, inputs_of, running
from deepsent.chain_results import SIMULATION_START, ChainRun
from deepsent.profiles import profile_named
from deepsent.run_record import write_record
from deepsent.stages import best_trained, train_label
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED

T = TypeVar("T")

log = logging.getLogger("deepsent.run")


def _timed(label: str, fn: Callable[[], T], timings: dict[str, float]) -> T:
    log.info("== %s ...", label)
    started = time.perf_counter()
    result = fn()
    timings[label] = round(time.perf_counter() - started, 1)
    log.info("== %s done in %.1f s", label, timings[label])
    return result


def execute(chain_run: ChainRun, stages: tuple[Stage, ...] = CHAIN) -> tuple[dict[str, Any], dict[str, float]]:
    """Every stage of ``stages`` in order (a mapped one once per grid point); the results by stage name and
    the seconds each took."""
    results: dict[str, Any] = {}
    timings: dict[str, float] = {}
    for declared in stages:
        inputs = inputs_of(declared, results)
        if declared.mapped:
            results[declared.name] = [
                _timed(train_label(point), lambda p=point: running(declared, chain_run, **inputs, point=p), timings)
                for point in chain_run.profile.models]
        else:
            results[declared.name] = _timed(declared.name, lambda: running(declared, chain_run, **inputs), timings)
    return results, timings


def run(settings: Settings, profile_name: str = "quick", start: dt.date = SIMULATION_START, seed: int = SEED,
        tags: dict[str, str] | None = None, resume: bool = False,
        landed: tuple[dt.date, ...] | None = None) -> dict[str, Any]:
    """Run the chain on profile ``profile_name``; the comparison table and where to browse it.

    With ``resume`` every grid point continues from its checkpoint, and one that finished returns
    its result at once: the stages before training are idempotent and give the same feature
    versions, so an interrupted ``full`` run loses at most one epoch. With ``landed`` (the landed days,
    :func:`deepsent.landed.landed_days`) nothing is simulated: those days are ingested, as the retrain DAG does.
    """
    profile = profile_named(profile_name)
    simulate = {"simulate_days": profile.days, "simulate_start": start} if landed is None else {"ingest_dates": landed}
    chain_run = ChainRun(settings=settings, profile=profile, seed=seed, tags=dict(tags or {}), resume=resume, **simulate)
    started = time.perf_counter()
    results, timings = execute(chain_run)
    trained, table = results["train"], results["compare"]
    result = {
        "profile": profile.name,
        "source": "simulated" if landed is None else "landing",
        "seconds": round(time.perf_counter() - started, 1),
        "timings": timings,
        "counts": {
            "landing_rows": results["simulate"].lines,
            "ingest": results["ingest"].counts,
            "pairs": {"train_pairs": results["pairs"].train_pairs, "valid_pairs": results["pairs"].valid_pairs},
        },
        "features": results["featurize"].versions,
        "models": [{k: getattr(r, k) for k in ("name", "run_id", "model_uri", "best_metric", "best_epoch", "epochs_run",
                                               "param_count")}
                   for r in trained],
        "best_model": best_trained(trained, profile.models).model_uri,
        "ensemble": results["ensemble"].to_dict(),
        "ship": results["ship"].to_dict(),
        "encode": results["encode"].to_dict(),
        "promotion": results["promote"].to_dict(),
        "index": {k: getattr(results["index"], k) for k in ("root", "model_uri", "version", "count", "encoded")},
        "search_example": search_example(settings),
        "report": table.report,
        "served_search": {"corpus_titles": results["search"].corpus_titles, "queries": results["search"].queries,
                          "judgments": results["search"].judgments, "rows": _served_rows(results["search"].rows),
                          "cold_start": results["search"].cold_start,
                          "table_markdown": results["search"].table_markdown},
        "mlflow_tracking_uri": settings.mlflow_tracking_uri,
        "mlflow_ui": mlflow_ui_hint(settings),
        "table": {"judgments": table.judgments, "queries": table.queries, "pairs": table.pairs,
                  "reference": table.reference, "rows": table.rows, "unavailable": table.unavailable},
        "table_markdown": table.table_markdown,
    }
    return {**result, "run_record": write_record(result, settings)}


def _served_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Name, mode, whether it is the reference (BM25), Recall@10/@100, NDCG@10, marks, the linear or click-prior weight
    and latency of each row."""
    keys = ("recall@10", "recall@100", "ndcg@10")
    return [{"name": r["name"], "mode": r["mode"], "reference": r["reference"], **{k: round(r[k], 4) for k in keys},
             **{f"sig:{k}": r[f"sig:{k}"] for k in keys}, "linear_weight": r.get("linear_weight"),
             "prior_weight": r.get("prior_weight"),
             "latency": r.get("latency")} for r in rows]


def mlflow_ui_hint(settings: Settings) -> str:
    """The command that opens the MLflow UI on this run's tracking store."""
    return (f".venv/bin/mlflow ui --backend-store-uri {settings.mlflow_tracking_uri} --host 127.0.0.1 --port 5000"
            "  (then open http://127.0.0.1:5000), or `deepsent stack up` for Airflow + MLflow + S3")


def summary(result: dict[str, Any]) -> str:
    """Readable end-of-job report: stage timings, models, the table and where to browse it."""
    source = " --from-landing" if result.get("source") == "landing" else ""
    lines = [f"deepsent run --profile {result['profile']}{source}: done in {result['seconds'] / 60:.1f} min", ""]
    lines += [f"  {stage:<32} {sec:>8.1f} s" for stage, sec in result["timings"].items()]
    lines += ["", "Models trained (best epoch by validation loss on the held-out click pairs):"]
    lines += [f"  {m['name']:<32} run {m['run_id']}  best epoch {m['best_epoch']} of {m['epochs_run']}"
              f"  valid MRR {m['best_metric']:.4f}"
              for m in result["models"]]
    lines += ["", f"Which model to ship (decided on the {result['ship']['signal']}; never on the reported set):",
              "  " + result["ensemble"]["summary"], "  " + result["ship"]["summary"]]
    if result.get("encode"):
        lines += ["", "Corpus encoding of that model (once: the gate, the index and the search read it):",
                  "  " + result["encode"]["summary"]]
    gate = result["promotion"].get("gate_set") or "the gate set"
    lines += ["", f"Promotion of that model (gate: {gate}):", "  " + result["promotion"]["summary"].replace("\n", "\n  ")]
    served = result["served_search"]
    lines += ["", f"Served search of the champion beside BM25 (whole corpus of {served['corpus_titles']:,} titles, "
              f"{served['queries']} judged queries):", "", served["table_markdown"]]
    lines += ["", result["table_markdown"], "", f"Report: {result['report'].get('table.html', result['report'])}",
              f"Browse experiments: {result['mlflow_ui']}"]
    lines += [f"Run record: {result['run_record']}"] if "run_record" in result else []
    index = result.get("index")
    lines += [] if index is None else ["", f"The champion (version {index['version']}) is indexed: {index['count']:,} titles "
              f"({index['count'] - index['encoded']:,} vectors read from the store, {index['encoded']:,} encoded). Search it:",
              f"  {result['search_example']}"]
    return "\n".join(lines)


def search_example(settings: Settings) -> str:
    """The ``deepsent search`` command that queries this run's champion (``--store`` when not the default store)."""
    from pathlib import Path

    default = str(Path(".deepsent").resolve())
    flag = "" if settings.store == default else f" --store {settings.store}"
    return f'.venv/bin/deepsent search{flag} "cordless drill"'
