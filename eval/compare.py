"""The comparison stage: rank a judged set with every baseline and model, NDCG + significance.

Every scorer is fitted on the training side (judgments_train.csv) plus the unlabelled text
of the judged set, scores each judged (query, title) pair, and is evaluated with NDCG@1/3/10.
Each row is then compared with the best of the paper's baselines (highest mean of NDCG@1,
@3 and @10; neither the random floor nor the modern MiniLM extra is the reference) by a paired t-test over queries, with a bootstrap CI.
The table goes to ``reports/<run>/`` in the store and to an MLflow run of "deepsent-compare".
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from eval.baseline_catalog import BaselineSpec, baseline_class, baseline_names, baseline_spec, baselines, unavailable_reason
from eval.baselines.base import MODEL_URIS_KEY, FitContext, Scorer, check_options
from eval.baselines.bm25 import CORPUS_KEY
from eval.judgments import JudgedSet, load_judged_set
from eval.metrics import GAIN_NAME, KS, NdcgResult, ndcg
from eval.report import BETTER, WORSE, log_to_mlflow, report_files
from eval.results import CompareResult
from eval.significance import ALPHA, compare_paired
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from pipeline.storage.locations import report_file

log = logging.getLogger(__name__)
EXPERIMENT = "deepsent-compare"
@dataclass
class Evaluation:
    """One scored row: who, how it was fitted, and its per-query NDCG."""

    key: str
    name: str
    kind: str
    details: dict[str, Any]
    result: NdcgResult
    score_seconds: float


def split_baseline(spec: str) -> tuple[str, dict[str, str]]:
    """``plsa:topics=500:iterations=50`` -> ("plsa", {"topics": "500", "iterations": "50"}), texts unchecked."""
    name, *options = spec.strip().split(":")
    raw: dict[str, str] = {}
    for opt in options:
        key, sep, text = opt.partition("=")
        if not sep or not key:
            raise ConfigError(f"baseline option {opt!r} of {spec!r} is not key=value")
        raw[key] = text
    return name, raw


def parse_baseline(spec: str) -> tuple[str, dict[str, Any]]:
    """``plsa:topics=500:iterations=50`` -> ("plsa", {"topics": 500, "iterations": 50})."""
    name, raw = split_baseline(spec)
    return name, {key: _parse_value(text) for key, text in raw.items()}


def versus_reference(values: Any, reference_values: Any, seed: int) -> tuple[float, list[float], str]:
    """A row's paired test against the reference row: p-value, 95% CI of the mean difference, and
    ▲/▼ when significant at ALPHA (else empty)."""
    test = compare_paired(values, reference_values, seed=seed)
    mark = (BETTER if test.mean_diff > 0 else WORSE) if test.significant(ALPHA) else ""
    return test.p_value, [test.ci_low, test.ci_high], mark


def _parse_value(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _first_title_by_id(doc_ids: Sequence[str], titles: Sequence[str]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for doc, title in zip(doc_ids, titles):
        docs.setdefault(doc, title)
    return docs


def build_fit_context(settings: Settings, store: Store, judged: JudgedSet, seed: int) -> FitContext:
    """Training side (one title per product of judgments_train.csv) plus the judged set's text.

    ``extra[CORPUS_KEY]`` is the title corpus for term statistics: one title per product
    over both Home Depot files (a generic judged set's documents are added as its own).
    """
    train = read_judgments(settings.train_judgments)
    train_docs = _first_title_by_id(train.column("doc_id").to_pylist(), train.column("title").to_pylist())
    test_docs = _first_title_by_id(judged.doc_id, judged.title)
    shared_ids = judged.fmt == "homedepot"
    extra_docs = [t for d, t in test_docs.items() if not (shared_ids and d in train_docs)]
    return FitContext(
        settings=settings,
        store=store,
        train_titles=list(train_docs.values()),
        train_queries=list(dict.fromkeys(train.column("query").to_pylist())),
        test_titles=list(dict.fromkeys(judged.title)),  # every variant: one product may carry two titles
        test_queries=list(dict.fromkeys(judged.query)),
        seed=seed,
        extra={CORPUS_KEY: list(train_docs.values()) + extra_docs},
    )


def resolve_baselines(specs: Sequence[str]) -> tuple[list[tuple[str, str, Scorer]], dict[str, str]]:
    """(key, name, scorer) per available spec, and the reason for each unavailable optional one."""
    scorers: list[tuple[str, str, Scorer]] = []
    unavailable: dict[str, str] = {}
    for spec in specs:
        name, raw = split_baseline(spec)
        declared = baseline_spec(name)
        reason = unavailable_reason(name)
        if reason:
            unavailable[spec] = reason
            continue
        factory = baseline_class(name)
        kwargs = check_options(factory, name, raw)
        scorer = factory(**kwargs)
        label = declared.label
        if kwargs:
            label += " (" + ", ".join(f"{k}={v}" for k, v in kwargs.items()) + ")"
        scorers.append((spec, label, scorer))
    return scorers, unavailable


def evaluate(key: str, name: str, kind: str, scorer: Scorer, ctx: FitContext, judged: JudgedSet) -> Evaluation:
    """Fit (or load) a scorer, score every judged pair, compute NDCG per query."""
    started = time.perf_counter()
    scorer.fit(ctx)
    fitted = time.perf_counter()
    scores = np.asarray(scorer.score(judged.query, judged.title), dtype=np.float64)
    score_seconds = time.perf_counter() - fitted
    if scores.shape != (len(judged),):
        raise ConfigError(f"{key}: returned {scores.shape} scores for {len(judged)} pairs")
    details = dict(scorer.describe())
    details.setdefault("fit_seconds", fitted - started)
    label = name if kind == "baseline" else str(getattr(scorer, "name", name))
    log.info("%s: fit %.1f s, score %.1f s", key, details["fit_seconds"], score_seconds)
    return Evaluation(key, label, kind, details, ndcg(judged, scores), score_seconds)


def _declared(ev: Evaluation) -> BaselineSpec | None:
    """The catalog entry of a baseline row (None for a scorer that is not a declared baseline)."""
    return baselines().get(parse_baseline(ev.key)[0])


def _overall(ev: Evaluation) -> float:
    return float(np.mean([ev.result.mean(k) for k in KS]))


def reference_of(evaluations: Sequence[Evaluation]) -> Evaluation | None:
    """The best of the paper's baselines by mean NDCG over the cutoffs, as in Table IV.

    The random floor and the modern extra (MiniLM) are not candidates when a paper baseline
    exists: they get their own significance marks against the reference like the models do.
    """
    baselines = [e for e in evaluations if e.kind == "baseline"]
    candidates = [e for e in baselines if getattr(_declared(e), "reference", True)] or baselines
    return max(candidates, key=_overall) if candidates else None


def build_rows(evaluations: Sequence[Evaluation], reference: Evaluation | None, seed: int) -> list[dict[str, Any]]:
    """Table rows: NDCG per cutoff, and p-value, bootstrap CI and mark against the reference."""
    rows = []
    for ev in evaluations:
        row: dict[str, Any] = {
            "key": ev.key,
            "name": ev.name,
            "kind": ev.kind,
            "settings": str(ev.details.get("settings", "")),
            "params": ev.details.get("params"),
            "reference": ev is reference,
            "fit_seconds": float(ev.details.get("fit_seconds", 0.0)),
            "score_seconds": ev.score_seconds,
            "cached": bool(ev.details.get("cached", False)),
            "run_id": ev.details.get("run_id"),
        }
        for k in KS:
            row[f"ndcg@{k}"] = ev.result.mean(k)
            row[f"p@{k}"], row[f"ci@{k}"], row[f"sig@{k}"] = (
                versus_reference(ev.result.valid(k), reference.result.valid(k), seed)
                if reference is not None and ev is not reference else (None, None, ""))
        rows.append(row)
    return rows


def _order(evaluations: list[Evaluation]) -> list[Evaluation]:
    """Baselines, then models, then the random floor last."""
    floor = [e for e in evaluations if e.kind == "baseline" and getattr(_declared(e), "floor", False)]
    rest = [e for e in evaluations if e not in floor]
    return [e for e in rest if e.kind == "baseline"] + [e for e in rest if e.kind == "model"] + floor


def _caption(judged: JudgedSet, reference: Evaluation | None, excluded: int) -> str:
    ref = (
        f"{BETTER}/{WORSE}: significantly better/worse than {reference.name} (the best of the paper's baselines; "
        f"paired t-test over queries, p < {ALPHA}); 95% bootstrap CIs in table.csv."
        if reference
        else "No baseline: no significance marks."
    )
    return (
        f"NDCG (%) on {judged.name}: {judged.num_queries - excluded} queries, {len(judged)} judged titles "
        f"({excluded} queries without a positive grade excluded); {GAIN_NAME}; ties broken by ascending "
        f"document id. {ref}"
    )


def compare(
    settings: Settings,
    judgments: Path | str | None = None,
    fmt: str | None = None,
    models: Sequence[str] = (),
    baselines: Sequence[str] | None = None,
    seed: int = SEED,
    tags: dict[str, str] | None = None,
    report_name: str | None = None,
) -> CompareResult:
    """Evaluate baselines and trained models on a judged set; write the table to the store and MLflow."""
    from eval.model_scorer import ModelScorer

    specs = list(baseline_names() if baselines is None else baselines)
    scorers, unavailable = resolve_baselines(specs)  # bad options fail before any reading or fitting
    judged = load_judged_set(judgments or settings.dev_judgments, fmt)
    judged.require_graded_queries()
    store = Store.from_settings(settings)
    ctx = build_fit_context(settings, store, judged, seed)
    ctx.extra[MODEL_URIS_KEY] = list(models)  # fusion baselines (linear, rrf) fuse BM25 with one of them
    evaluations: list[Evaluation] = []
    for key, name, scorer in scorers:
        if getattr(scorer, "needs_model", False) and not models:
            unavailable[key] = f"{key} unavailable: it fuses BM25 with a trained model; pass --models"
            continue
        try:
            evaluations.append(evaluate(key, name, "baseline", scorer, ctx, judged))
        except ImportError as exc:  # an optional dependency that is installed but broken
            unavailable[key] = f"{key} unavailable: {exc}"
    for uri in models:
        evaluations.append(evaluate(uri, uri, "model", ModelScorer(uri), ctx, judged))
    if not evaluations:
        raise ConfigError("nothing to compare: no baseline or model is available")
    evaluations = _order(evaluations)
    reference = reference_of(evaluations)
    rows = build_rows(evaluations, reference, seed)
    excluded = [judged.queries[q] for q in evaluations[0].result.excluded.tolist()]
    caption = _caption(judged, reference, len(excluded))
    run = report_name or _default_run_name(judged, specs, models, seed)
    files = report_files(judged, [(ev.key, ev.result) for ev in evaluations], rows, caption)
    uris = {name: store.write_bytes(report_file(run, name), data) for name, data in files.items()}
    params = {
        "judgments": judged.source,
        "judgments_sha256": judged.digest(),
        "format": judged.fmt,
        "baselines": ",".join(specs),
        "models": ",".join(models),
        "seed": str(seed),
        "reference": reference.key if reference else "",
        "gain": GAIN_NAME,
    }
    all_tags = {"deepsent.stage": "compare", "deepsent.report": uris["table.md"], **(tags or {})}
    run_id = log_to_mlflow(settings, EXPERIMENT, run, params, rows, files, all_tags)
    return CompareResult(
        judgments=judged.source,
        format=judged.fmt,
        queries=judged.num_queries - len(excluded),
        pairs=len(judged),
        excluded_queries=excluded,
        reference=reference.name if reference else None,
        rows=rows,
        unavailable=unavailable,
        report=uris,
        report_name=run,
        mlflow_run_id=run_id,
        experiment=EXPERIMENT,
        table_markdown=files["table.md"].decode("utf-8"),
    )


def _default_run_name(judged: JudgedSet, specs: Sequence[str], models: Sequence[str], seed: int) -> str:
    blob = json.dumps([judged.digest(), list(specs), list(models), seed]).encode("utf-8")
    return f"compare-{judged.name}-{hashlib.sha256(blob).hexdigest()[:10]}"
