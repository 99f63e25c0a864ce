"""MLflow bookkeeping of one training run: its params, feature set, per-epoch metrics, summary and artifacts.

The run itself is :func:`encoders.model.tracking.run`; this module logs what training knows
(the trainer's state, its epochs, the cost curve), and ``best_epoch`` is logged 1-based.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from encoders.model.device import describe
from encoders.model.tracking import log_params, run
from pipeline.core.config import Settings
from pipeline.features.feature_files import feature_root


def training_run(settings: Settings, experiment: str, model: str, key: str, run_id: str | None,
                 tags: dict[str, str], is_main: bool) -> Any:
    """The MLflow run of training run ``key`` (``run_id`` continued on resume); a no-op off the main rank. A new run
    first ends the runs an earlier try of its Airflow task left RUNNING (its worker was SIGKILLed or ran out of memory
    before its first checkpoint), with every other run a killed process left (:mod:`encoders.model.run_owner`)."""
    from contextlib import nullcontext

    if not is_main:
        return nullcontext(None)
    tags = {**tags, "deepsent.model": model, "deepsent.run_key": key}
    return run(settings, experiment, run_id=run_id, run_name=f"{model}-{key[:8]}", tags=tags, superseding=tags)


def begin_training(training: Any, active: Any) -> str:
    """Log a new run's params (full config, resolved tower, device, data, model size), or the epochs a
    resumed run's MLflow run has not seen; returns the MLflow run id (``training``: trainer state)."""
    if training.run_id is not None:
        log_missing_epochs(training.run_id, training.history)
        return str(training.run_id)
    counts = training.model.param_counts()
    log_params({**dataclasses.asdict(training.config), "tower": training.model.config, "device": describe(training.device),
                "vocab_version": training.vocab.version, "vocab_size": training.vocab.size,
                "max_words": training.max_words, "train_pairs": training.train_data.num_rows,
                "valid_pairs": training.valid_data.num_rows, "steps_total": training.total_steps,
                "param_count": counts["total"], "param_count_per_tower": counts["query"], "run_key": training.key})
    log_features_input(training.store, training.config.features_version)
    return str(active.info.run_id)


def log_features_input(store: Any, version: str) -> None:
    """The feature set as the active run's training dataset input (MLflow's "Dataset" column): its folder
    in the store as source, ``features-<version>`` as name, the content-hashed version as digest."""
    import warnings

    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    with warnings.catch_warnings():  # MLflow registers its local source twice ("" and file:) and warns of it
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(store.uri(feature_root(version)))
    mlflow.log_input(MetaDataset(source, name=f"features-{version}", digest=version[:36]), context="training")


def log_epoch(record: dict[str, Any], epoch: int) -> None:
    """Per-epoch numbers of the active run at step ``epoch`` (non-numeric entries skipped)."""
    import mlflow

    numbers = {k: float(v) for k, v in record.items() if isinstance(v, (int, float)) and k != "epoch"}
    mlflow.log_metrics(numbers, step=epoch)


def logged_epochs(run_id: str, key: str = "valid_loss") -> set[int]:
    """Steps at which ``key`` was logged in run ``run_id`` (to fill gaps after a resume)."""
    from mlflow import MlflowClient

    return {m.step for m in MlflowClient().get_metric_history(run_id, key)}


def log_missing_epochs(run_id: str, history: list[dict[str, Any]]) -> None:
    """After a kill between checkpoint and logging, log the epochs MLflow has not seen."""
    seen = logged_epochs(run_id)
    for record in history:
        if record["epoch"] not in seen:
            log_epoch(record, record["epoch"])


def log_training_summary(best: dict[str, Any], history: list[dict[str, Any]], param_count: int,
                         seconds: float) -> tuple[dict[str, float], float]:
    """Best-epoch metrics, mean throughput, size and time of the active run; returns (best metrics, throughput).

    ``best_epoch`` is logged 1-based, as the summaries print it (``best["epoch"]`` counts from 0).
    """
    import mlflow

    best_metrics = {f"best_{k}": v for k, v in best.get("metrics", {}).items()
                    if k in ("valid_loss", "valid_acc", "valid_mrr", "train_loss")}
    throughput = sum(h["examples_per_s"] for h in history) / len(history)
    mlflow.log_metrics({**best_metrics, "best_epoch": best["epoch"] + 1, "examples_per_s_mean": throughput,
                        "param_count": param_count, "train_seconds_total": seconds})
    return best_metrics, throughput


#: A model whose best validation MRR is within this of chance is marked ``deepsent.at_chance`` (never silently kept).
CHANCE_MARGIN = 0.02


def chance_mrr(negatives: int) -> float:
    """The MRR of a random order of the clicked title among ``negatives`` + 1 candidates."""
    return sum(1.0 / rank for rank in range(1, negatives + 2)) / (negatives + 1)


def mark_if_at_chance(best_mrr: float, negatives: int) -> bool:
    """Tag the active run ``deepsent.at_chance`` and warn when its best validation MRR is no better than chance."""
    import logging

    import mlflow

    chance = chance_mrr(negatives)
    at_chance = best_mrr <= chance + CHANCE_MARGIN
    mlflow.set_tag("deepsent.at_chance", str(at_chance).lower())
    if at_chance:
        logging.getLogger(__name__).warning("valid MRR %.4f is no better than chance (%.4f with %d negatives): the "
                                            "model learned nothing; do not ship it", best_mrr, chance, negatives)
    return at_chance


def log_artifacts_of_training(history: list[dict[str, Any]], vocab: dict[str, Any]) -> None:
    """Cost-curve plot, epoch history and the vocabulary as artifacts of the active run."""
    import mlflow

    from encoders.analysis.plots import cost_curve_figure

    curves = [(label, [(h["epoch"] + 1, h[key]) for h in history])
              for label, key in (("training cost", "train_loss"), ("validation loss", "valid_loss"))]
    mlflow.log_figure(cost_curve_figure(curves), "cost_curve.png")
    mlflow.log_dict({"epochs": history}, "history.json")
    mlflow.log_dict(vocab, "vocab.json")
