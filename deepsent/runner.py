"""The main job, in process: simulate -> ingest -> pairs -> featurize -> train -> ensemble -> ship -> promote
-> embed -> compare.

After training, the best LSTM-RNN is joined with MiniLM (``deepsent ensemble``: the fine-tuned MiniLM
when the profile trains one, else the packaged weights), and the model to ship is the candidate with the
best click MRR on held-out click lists whose negatives are titles the log showed and nobody clicked
(``eval.shipping``; never a judged set). That model is put up for promotion (``eval.promotion``):
registered as the ``challenger`` of ``deepsent-ranker`` and gated against the ``champion`` on the dev set.

Two profiles. ``quick`` (README command 1) trains the LSTM-RNN and DSSM on 30 simulated days, builds
the ensemble and compares them with every baseline in about ten minutes on 2 cores. ``full`` reproduces
the whole Table IV grid (DSSM, CLSM win 1/3/5, RNN, LSTM ncell 32/64/96, n = 2/4/6/8, BiLSTM, PLSA
with 500 topics, the longer skip-thought training) and fine-tunes MiniLM for one epoch; about two hours
on a 2-core CPU without the MiniLM epoch (docs/RESULTS.md).
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from encoders.training.results import TrainResult, select_best
from eval.baseline_catalog import profile_baselines
from pipeline.core.config import Settings
from pipeline.core.defaults import NEGATIVES, SEED
from pipeline.core.errors import ConfigError
from pipeline.features.negatives import MIXED, RANDOM, SKIPPED

T = TypeVar("T")

log = logging.getLogger("deepsent.run")


@dataclass(frozen=True)
class ModelSpec:
    """One model of a profile's grid: tower type, tower config, negatives n, epochs, where negatives come from."""

    model: str
    tower: dict[str, Any] = field(default_factory=dict)
    negatives: int = NEGATIVES
    epochs: int = 10
    negative_source: str = RANDOM


@dataclass(frozen=True)
class Profile:
    """What the main job runs."""

    name: str
    days: int
    models: tuple[ModelSpec, ...]
    baselines: tuple[str, ...]
    patience: int = 3



PROFILES: dict[str, Profile] = {
    "quick": Profile(
        name="quick",
        days=30,
        models=(ModelSpec("lstm", {"ncell": 96}, 4, epochs=8), ModelSpec("dssm", {}, 4, epochs=8)),
        baselines=profile_baselines("quick"),
    ),
    "full": Profile(
        name="full",
        days=30,
        models=(
            ModelSpec("dssm", {}, 4, 30),
            ModelSpec("clsm", {"win": 1}, 4, 30),
            ModelSpec("clsm", {"win": 3}, 4, 30),
            ModelSpec("clsm", {"win": 5}, 4, 30),
            ModelSpec("rnn", {"nhid": 288}, 4, 30),
            ModelSpec("lstm", {"ncell": 32}, 4, 30),
            ModelSpec("lstm", {"ncell": 64}, 4, 30),
            ModelSpec("lstm", {"ncell": 96}, 2, 30),
            ModelSpec("lstm", {"ncell": 96}, 4, 30),
            ModelSpec("lstm", {"ncell": 96}, 6, 30),
            ModelSpec("lstm", {"ncell": 96}, 8, 30),
            ModelSpec("lstm", {"ncell": 96}, 4, 30, negative_source=SKIPPED),
            ModelSpec("lstm", {"ncell": 96}, 4, 30, negative_source=MIXED),
            ModelSpec("bilstm", {"ncell": 96}, 4, 30),
            ModelSpec("minilm", {"in_batch": True}, 4, 1),  # ~1.5 h an epoch on 2 CPU cores; minutes on a GPU
        ),
        baselines=profile_baselines("full"),
        patience=5,
    ),
}


def _stage(name: str, fn: Callable[[], T], timings: dict[str, float]) -> T:
    log.info("== %s ...", name)
    started = time.perf_counter()
    result = fn()
    timings[name] = round(time.perf_counter() - started, 1)
    log.info("== %s done in %.1f s", name, timings[name])
    return result


def run(settings: Settings, profile_name: str = "quick", start: dt.date = dt.date(2026, 1, 1), seed: int = SEED,
        tags: dict[str, str] | None = None, resume: bool = False) -> dict[str, Any]:
    """Run every stage of ``profile_name`` in order; the comparison table and where to browse it.

    With ``resume`` every grid point continues from its checkpoint, and one that finished returns
    its result at once: the stages before training are idempotent and give the same feature
    versions, so an interrupted ``full`` run loses at most one epoch.
    """
    from encoders.search.embed import embed
    from encoders.training.ensemble_build import build_ensemble
    from encoders.training.trainer import TrainConfig, train
    from eval.compare import compare
    from eval.promotion import promote
    from eval.shipping import choose_ship
    from pipeline.features.featurize import featurize
    from pipeline.features.pairs import build_pairs
    from pipeline.ingest.ingest import COUNT_KEYS, ingest_dates
    from pipeline.simulate.simulate import simulate

    if profile_name not in PROFILES:
        raise ConfigError(f"unknown profile {profile_name!r}; choose one of {', '.join(PROFILES)}")
    profile = PROFILES[profile_name]
    if not any(spec.model == "lstm" for spec in profile.models):
        raise ConfigError(f"profile {profile_name!r} trains no LSTM-RNN, and the ensemble it ships is built on one")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    dates = [start + dt.timedelta(days=i) for i in range(profile.days)]
    sim = _stage("simulate", lambda: simulate(settings, start, profile.days, seed=seed), timings)
    ing = _stage("ingest", lambda: ingest_dates(settings, dates), timings)
    pairs = _stage("pairs", lambda: build_pairs(settings, seed=seed), timings)
    ship_key = (NEGATIVES, SKIPPED)  # the held-out click lists the ship choice ranks on
    feats = {}
    for n, source in sorted({ship_key} | {(m.negatives, m.negative_source) for m in profile.models},
                            key=lambda k: (k[1] == RANDOM, k)):
        label = f"featurize n={negatives_key(n, source)}" + (" (ship)" if (n, source) == ship_key else "")
        feats[n, source] = _stage(label, lambda n=n, source=source: featurize(
            settings, negatives=n, seed=seed, negative_source=source), timings)
    ship_lists = feats[ship_key]
    trained = []
    for spec in profile.models:
        config = TrainConfig(model=spec.model, tower=dict(spec.tower), negatives=spec.negatives, epochs=spec.epochs,
                             patience=profile.patience, seed=seed, features_version=feats[spec.negatives, spec.negative_source].version,
                             resume=resume)
        trained.append(_stage(train_label(spec), lambda c=config: train(settings, c, tags=tags), timings))
    best = best_trained(trained, profile.models)
    ensemble = _stage("ensemble LSTM-RNN + MiniLM", lambda: build_ensemble(
        settings, best_of(trained, profile.models, "lstm").model_uri, ship_lists.version,
        minilm_uri=_uri_or_none(best_of(trained, profile.models, "minilm")), tags=tags, resume=resume), timings)
    ship = _stage("choose the model to ship", lambda: choose_ship(
        settings, ship_candidates(trained, profile.models, ensemble), ship_lists.version,
        measured={ensemble.model_uri: ensemble.click_mrr}, reference=off_the_shelf_reference(ensemble)), timings)
    promotion = _stage("promote", lambda: promote(settings, ship.model_uri, tags=tags), timings)
    emb = _stage(f"embed {best.name}", lambda: embed(settings, best.model_uri), timings)
    table = _stage("compare", lambda: compare(settings, models=[r.model_uri for r in trained] + [ensemble.model_uri],
                                              baselines=list(profile.baselines), seed=seed, tags=tags), timings)
    total = round(time.perf_counter() - started, 1)
    return {
        "profile": profile.name,
        "seconds": total,
        "timings": timings,
        "counts": {
            "landing_rows": sim.get("lines"),
            "ingest": {k: ing[k] for k in COUNT_KEYS},
            "pairs": {k: pairs.get(k) for k in ("train_pairs", "valid_pairs") if k in pairs},
        },
        "features": {negatives_key(n, source): f.version for (n, source), f in feats.items()},
        "models": [{k: getattr(r, k) for k in ("name", "run_id", "model_uri", "best_metric", "best_epoch", "epochs_run",
                                               "param_count")}
                   for r in trained],
        "best_model": best.model_uri,
        "ensemble": ensemble.to_dict(),
        "ship": ship.to_dict(),
        "promotion": promotion.to_dict(),
        "embeddings": emb.root,
        "report": table.report,
        "mlflow_tracking_uri": settings.mlflow_tracking_uri,
        "mlflow_ui": mlflow_ui_hint(settings),
        "table_markdown": table.table_markdown,
    }


def best_trained(trained: list[TrainResult], specs: tuple[ModelSpec, ...]) -> TrainResult:
    """:func:`encoders.training.results.select_best` among the runs trained with the grid's most common n.

    MRR of the clicked title among 1 + n candidates rises as n falls, so runs are only compared
    with runs of the same n.
    """
    runs = [(run, spec) for run, spec in zip(trained, specs) if spec.negative_source == RANDOM]
    counts = [spec.negatives for _, spec in runs]
    usual_n = max(set(counts), key=counts.count)
    return select_best(run for run, spec in runs if spec.negatives == usual_n)


def best_of(trained: list[TrainResult], specs: tuple[ModelSpec, ...], model: str) -> TrainResult | None:
    """:func:`best_trained` among the runs of tower type ``model``; None when the grid has none."""
    runs = [(run, spec) for run, spec in zip(trained, specs) if spec.model == model]
    return best_trained([r for r, _ in runs], tuple(s for _, s in runs)) if runs else None


def _uri_or_none(result: TrainResult | None) -> str | None:
    return result.model_uri if result else None


def off_the_shelf_reference(ensemble: Any) -> dict[str, float]:
    """The packaged MiniLM's click MRR as a reference row of the ship choice, when the ensemble used it."""
    from encoders.training.ensemble_build import OFF_THE_SHELF

    return {"MiniLM-L6 off-the-shelf": ensemble.part_mrr["minilm"]} if ensemble.parts["minilm"] == OFF_THE_SHELF else {}


def negatives_key(n: int, source: str) -> str:
    """How features and runs are labelled: ``4``, or ``4 skipped`` when the negatives are not the paper's random."""
    return f"{n}" + ("" if source == RANDOM else f" {source}")


def _source_note(spec: ModelSpec) -> str:
    return "" if spec.negative_source == RANDOM else f" {spec.negative_source} negatives"


def train_label(spec: ModelSpec) -> str:
    """The training stage's label: tower type, tower config, n and the negatives' source when not random."""
    tower = "".join(f" {k}={v}" for k, v in spec.tower.items())
    return f"train {spec.model}{tower} n={spec.negatives}{_source_note(spec)}"


def candidate_label(name: str, spec: ModelSpec, specs: tuple[ModelSpec, ...]) -> str:
    """``name`` with the spec's n when the grid trains that tower at several n, and its negatives' source
    when they are not random."""
    same = [s for s in specs if s.model == spec.model and s.tower == spec.tower]
    return name + (f" n={spec.negatives}" if len(same) > 1 else "") + _source_note(spec)


def ship_candidates(trained: list[TrainResult], specs: tuple[ModelSpec, ...], ensemble: Any) -> list[tuple[str, str]]:
    """(label, model URI) of every trained run and the ensemble: what the job may ship."""
    return [(candidate_label(r.name, s, specs), r.model_uri) for r, s in zip(trained, specs)] + [(ensemble.name, ensemble.model_uri)]


def mlflow_ui_hint(settings: Settings) -> str:
    """The command that opens the MLflow UI on this run's tracking store."""
    return (f".venv/bin/mlflow ui --backend-store-uri {settings.mlflow_tracking_uri} --host 127.0.0.1 --port 5000"
            "  (then open http://127.0.0.1:5000), or `deepsent stack up` for Airflow + MLflow + S3")


def summary(result: dict[str, Any]) -> str:
    """Readable end-of-job report: stage timings, models, the table and where to browse it."""
    lines = [f"deepsent run --profile {result['profile']}: done in {result['seconds'] / 60:.1f} min", ""]
    lines += [f"  {stage:<32} {sec:>8.1f} s" for stage, sec in result["timings"].items()]
    lines += ["", "Models trained (best epoch by validation loss on the held-out click pairs):"]
    lines += [f"  {m['name']:<32} run {m['run_id']}  best epoch {m['best_epoch']} of {m['epochs_run']}"
              f"  valid MRR {m['best_metric']:.4f}"
              for m in result["models"]]
    lines += ["", "Which model to ship (chosen on held-out click lists, never on a judged set):",
              "  " + result["ensemble"]["summary"], "  " + result["ship"]["summary"]]
    lines += ["", "Promotion of that model (gate: the dev set):", "  " + result["promotion"]["summary"].replace("\n", "\n  ")]
    lines += ["", result["table_markdown"], "", f"Report: {result['report'].get('table.html', result['report'])}",
              f"Browse experiments: {result['mlflow_ui']}"]
    return "\n".join(lines)
