"""``deepsent promote``: register a model as the ranker's challenger, gate it against the champion, record why.

:func:`promote` registers the model as a version of ``deepsent-ranker`` (``encoders.model.ranker_registry``),
aliases it ``challenger``, scores it and the current champion on the gate set in one paired
comparison (``eval.promotion.gate``) and moves ``champion`` to it when the gate passes, there is no
champion yet, or ``force`` says so. ``version`` rolls the champion back (or forward) to a version.
Every decision is one MLflow run of the ``deepsent-promotion`` experiment and tags on the model
version (decision, reason, the version compared against, NDCG@1/3/10 on the gate set, the gate
set's path and SHA-256), so the registry page shows how good each version is. The whole
read-decide-write runs under the registry's promotion lock, and the champion is re-read after
the gate: when another host moved it meanwhile, the gate runs again against the new one. A SIGINT or SIGTERM stops
it only at checkpoints before the decision is recorded; after, the decision stands (:mod:`eval.promotion.stops`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from encoders.model import ranker_registry as ranker
from encoders.model import tracking
from encoders.model.run_owner import end_left_runs
from eval.decisions.gate_set import DecisionSet, gate_decision_set
from eval.promotion.gate import DEFAULT_METRIC, GateDecision, decide, metric_cutoff, score_models, served_figures
from eval.promotion.stops import Progress, stops_before_the_decision, stops_over_errors
from eval.results import PromotionResult
from pipeline.core.config import Settings
from pipeline.core.defaults import GATE_CLICKS, SEED
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.runtime.interrupt import checkpoint, interruptible

log = logging.getLogger(__name__)

EXPERIMENT = "deepsent-promotion"
GATE_ATTEMPTS = 3


def _number(version: Any | None) -> str | None:
    """The version number of a registry ``ModelVersion`` as text (None for None)."""
    return None if version is None else str(version.version)


def _mlflow_error(exc: Exception) -> str:
    """The first line of an MLflow error (its messages may span many)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _gate(settings: Settings, decision: DecisionSet, challenger: Any, champion: Any | None, metric: str,
          seed: int) -> GateDecision | None:
    """The gate's decision for ``challenger`` against ``champion``; None when it already is the champion."""
    if _number(champion) == _number(challenger):
        return None
    uris = [ranker.version_uri(_number(challenger))] + ([ranker.version_uri(_number(champion))] if champion else [])
    from eval.model_scorer import ModelScorer

    scorers = [ModelScorer(uri) for uri in uris]  # loaded once, for the click lists and for the served search
    results = score_models(settings, decision.judged, scorers)
    served = served_figures(settings, scorers, seed, decision)  # the same decision set, read once
    return decide(results[0], results[1] if champion else None, metric, seed, served)


def promote(settings: Settings, model_uri: str | None = None, gate_judgments: str | Path | None = None,
            force: bool = False, version: str | None = None, metric: str = DEFAULT_METRIC, seed: int = SEED,
            tags: dict[str, str] | None = None, gate_features: str | None = None) -> PromotionResult:
    """Gate ``model_uri`` against the champion and promote it when it passes (or ``force``); with
    ``version``, make that ranker version the champion (a rollback). The gate set is the judged set
    ``gate_judgments`` when given (a path, ``gate-slice`` or ``clicks``), else the held-out click lists of
    ``gate_features`` when given, else the settings' gate set (:func:`eval.decisions.gate_set.decision_set`)."""
    from mlflow.exceptions import MlflowException

    if (model_uri is None) == (version is None):
        raise ConfigError("give either --model-uri URI (gate a model) or --version N (roll back to it)")
    metric_cutoff(metric)
    if gate_judgments is not None or gate_features:  # the served figures read the same set as the re-ranking
        settings = settings.with_overrides(gate_judgments=str(gate_judgments) if gate_judgments is not None
                                           else GATE_CLICKS)
    with stops_before_the_decision(Progress()) as progress:
        with interruptible():
            decision = None if version else gate_decision_set(settings, gate_judgments, gate_features)  # bad input first
        try:
            with ranker.promotion_lock(settings):
                end_left_runs(settings, EXPERIMENT, "promote")
                if version is not None:
                    return _roll_back(settings, str(version), tags, progress)
                ranker.client(settings).get_run(tracking.run_id_of(tracking.model_uri_of(model_uri)))  # unknown: stop
                return _gate_and_promote(settings, model_uri, decision, force, metric, seed, tags, progress)
        except MlflowException as exc:
            raise DeepsentError(f"cannot promote {model_uri or f'version {version}'}: {_mlflow_error(exc)}") from None


def _gate_and_promote(settings: Settings, model_uri: str, decided_on: DecisionSet, force: bool, metric: str, seed: int,
                      tags: dict[str, str] | None, progress: Progress) -> PromotionResult:
    import mlflow

    client = ranker.client(settings)
    checkpoint()
    with tracking.run(settings, EXPERIMENT, run_name="promote", tags=_run_tags(tags, model_uri)) as active, \
            stops_over_errors():  # an error once a stop came ends the run KILLED, as the stop
        progress.run_id = active.info.run_id
        checkpoint()
        challenger = ranker.register_challenger(settings, model_uri)
        mlflow.set_tag("deepsent.version", _number(challenger))  # an interrupted decision still names its challenger
        for _ in range(GATE_ATTEMPTS):
            champion = ranker.alias_version(client, ranker.CHAMPION)
            with interruptible():  # checkpoints before and after
                gate = _gate(settings, decided_on, challenger, champion, metric, seed)
            now = ranker.alias_version(client, ranker.CHAMPION)
            if _number(now) == _number(champion):
                break
            log.warning("the champion moved to version %s during the gate: gating again", now.version)
        else:
            raise DeepsentError(f"the champion kept moving during {GATE_ATTEMPTS} gates; try again")
        before, number = _number(champion), _number(challenger)
        if gate is None:
            decision, reason = "unchanged", f"version {number} already is the champion"
        elif gate.promote or force:
            decision = "promoted"
            reason = gate.reason if gate.promote else f"forced (--force) although the gate refused: {gate.reason}"
        else:
            decision, reason = "refused", gate.reason
        result = PromotionResult(
            decision=decision, champion=number if decision == "promoted" else before,
            champion_before=before, version=number, registered_name=ranker.RANKER,
            model_uri=ranker.version_uri(number), reason=reason, forced=reason.startswith("forced"),
            metric=metric, challenger_ndcg=gate.challenger if gate else {}, champion_ndcg=gate.champion if gate else None,
            p_values=gate.p_values if gate else {}, gate_set=decided_on.judged.source,
            gate_sha256=decided_on.judged.digest(),
            served=gate.served if gate else None,
            mlflow_run_id=active.info.run_id, challenger_uri=model_uri)
        _decide(client, result, progress)
        _record(client, result, model_uri, ranker.logged_model_id(challenger))
    return _with_summary(result)


def _roll_back(settings: Settings, version: str, tags: dict[str, str] | None, progress: Progress) -> PromotionResult:
    client = ranker.client(settings)
    target = _number(ranker.get_version(client, version))
    before = _number(ranker.alias_version(client, ranker.CHAMPION))
    with tracking.run(settings, EXPERIMENT, run_name="rollback", tags=_run_tags(tags, ranker.version_uri(target))) as active, \
            stops_over_errors():
        progress.run_id = active.info.run_id
        result = PromotionResult(
            decision="rolled back", champion=target, champion_before=before, version=target,
            registered_name=ranker.RANKER, model_uri=ranker.version_uri(target),
            reason=f"--version {target}: champion set by hand (was {before or 'unset'})", forced=True,
            metric="", mlflow_run_id=active.info.run_id)
        _decide(client, result, progress)
        _record(client, result, ranker.version_uri(target), None)
    return _with_summary(result)


def _run_tags(tags: dict[str, str] | None, model_uri: str) -> dict[str, str]:
    """Tags of a promotion run from its start: the stage and the model offered (:mod:`encoders.model.tracking` adds
    the owning process)."""
    return {"deepsent.stage": "promote", "deepsent.challenger_uri": model_uri, **(tags or {})}


def _decide(client: Any, result: PromotionResult, progress: Progress) -> None:
    """Record the decision after the last checkpoint: the champion alias when it moves (what serving reads), then the
    run's decision tags (what ``promote --status`` reads); a stop from here on leaves it standing."""
    import mlflow

    checkpoint()
    said = f"'{result.decision}' for {result.registered_name} version {result.version}"
    with progress.writing:
        if result.decision in ("promoted", "rolled back"):
            ranker.set_champion(client, result.version)
            progress.decided = said
        mlflow.set_tags({"deepsent.decision": result.decision, "deepsent.reason": result.reason,
                         "deepsent.version": result.version})
        progress.decided = said


def _record(client: Any, result: PromotionResult, model_uri: str, model_id: str | None) -> None:
    """The decision's figures as the active run's params and metrics, and the decision as tags on the model version."""
    import mlflow

    mlflow.log_params({"model_uri": model_uri, "version": result.version, "champion_before": result.champion_before,
                       "metric": result.metric, "force": result.forced, "gate_set": result.gate_set,
                       "gate_sha256": result.gate_sha256})
    slug = {m: m.replace("@", "_at_") for m in (*result.challenger_ndcg, *result.p_values)}
    metrics = {slug[m]: v for m, v in result.challenger_ndcg.items()}
    metrics.update({f"champion_{slug[m]}": v for m, v in (result.champion_ndcg or {}).items()})
    metrics.update({f"p_value_{slug[m]}": v for m, v in result.p_values.items()})
    metrics.update(_served_metrics(result.served))
    if metrics:
        mlflow.log_metrics(metrics, model_id=model_id)
    decision = {"deepsent.decision": result.decision, "deepsent.reason": result.reason}
    version_tags = {**decision, "deepsent.compared_against": result.champion_before or "none",
                    "deepsent.promotion_run": result.mlflow_run_id}
    if result.challenger_ndcg:
        version_tags.update({slug[m]: f"{v:.4f}" for m, v in result.challenger_ndcg.items()})
        version_tags.update({"deepsent.gate_set": result.gate_set, "deepsent.gate_sha256": result.gate_sha256})
    if result.served:
        ours = result.served["challenger"]
        version_tags.update({"deepsent.served_mode": ours["mode"], "deepsent.served_linear_weight": str(ours["linear_weight"]),
                             "served_recall_at_10": f"{ours['recall@10']:.4f}", "served_ndcg_at_10": f"{ours['ndcg@10']:.4f}",
                             "deepsent.served_set": f"{ours['queries']} queries of {ours.get('signal') or 'held-out clicks'}, "
                                                    f"whole corpus of {ours['corpus_titles']:,} titles"})
    ranker.tag_version(client, result.version, version_tags)


def _served_metrics(served: dict[str, Any] | None) -> dict[str, float]:
    """The served figures of the challenger (and the champion, prefixed) as MLflow metrics."""
    if not served:
        return {}
    out = {f"served_{m.replace('@', '_at_')}": served["challenger"][m] for m in ("recall@10", "ndcg@10")}
    if served["champion"]:
        out.update({f"champion_served_{m.replace('@', '_at_')}": served["champion"][m] for m in ("recall@10", "ndcg@10")})
        out["p_value_served_ndcg_at_10"] = served["p_value"]
    return out


def _with_summary(result: PromotionResult) -> PromotionResult:
    """``result`` with its one-paragraph readable summary."""
    import dataclasses

    name = f"{result.registered_name} version {result.version}"
    if result.decision == "promoted":
        text = f"promoted {name} to champion (was {result.champion_before or 'unset'}): {result.reason}"
    elif result.decision == "refused":
        text = f"refused {name}; the champion stays version {result.champion}: {result.reason}"
    elif result.decision == "unchanged":
        text = f"{name} already is the champion: nothing to do"
    else:
        text = f"rolled the champion back to {name} (was {result.champion_before or 'unset'})"
    where = f"\ndecision recorded in MLflow run {result.mlflow_run_id} (experiment {EXPERIMENT})"
    return dataclasses.replace(result, summary=text + _served_text(result.served) + where)


def _served_text(served: dict[str, Any] | None) -> str:
    """The served search figures of both models as one line (empty without them)."""
    if not served:
        return ""
    ours, theirs = served["challenger"], served["champion"]
    line = (f"\nserved search, whole corpus ({ours['corpus_titles']:,} titles, {ours['queries']} queries of "
            f"{ours.get('signal') or 'held-out clicks'}): "
            f"challenger {ours['mode']} Recall@10 {ours['recall@10']:.3f} NDCG@10 {ours['ndcg@10']:.3f}")
    if theirs:
        line += f"; champion {theirs['mode']} Recall@10 {theirs['recall@10']:.3f} NDCG@10 {theirs['ndcg@10']:.3f}"
    return line
