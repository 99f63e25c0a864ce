"""Results of training, and the one rule that picks the best trained model.

Torch-free: the runner and the DAG's ``pick_best`` task both import :func:`select_best` from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pipeline.core.results import StageResult


@dataclass(frozen=True, kw_only=True)
class TrainResult(StageResult):
    """One trained model: its MLflow run and registered version, best epoch, validation metrics, history."""

    run_id: str
    model_uri: str
    registered_name: str | None = None
    registered_version: str | None = None
    registry_uri: str | None = None
    model: str
    name: str
    best_epoch: int  # the best epoch, counted from 1 as MLflow and every summary show it (``history[best_epoch - 1]``)
    epochs_run: int
    stopped_early: bool
    best_metric: float
    best_metric_name: str = "valid_mrr"
    metrics: dict[str, float]
    history: list[dict[str, Any]] = field(default_factory=list)  # per epoch; left out of XCom
    param_count: int
    param_counts: dict[str, int]
    examples_per_s: float
    seconds: float
    device: str
    nproc: int
    features_version: str
    vocab_size: int
    checkpoint: str
    resumed_from_epoch: int | None = None
    summary: str = ""


def select_best(results: Iterable[TrainResult]) -> TrainResult:
    """The model with the highest validation MRR (``best_metric``, on the held-out click pairs), ties to the
    lower validation loss.

    Runs are only comparable when they rank the clicked title among the same number of negatives:
    the caller passes runs of one n. The first of equal runs wins.
    """
    runs = list(results)
    if not runs:
        raise ValueError("select_best: no trained model to choose from")
    return max(runs, key=lambda r: (r.best_metric, -r.metrics.get("best_valid_loss", float("inf"))))


@dataclass(frozen=True)
class EnsembleResult(StageResult):
    """The joined model: its run and registered version, its mix, the decision (``chosen_mix``: 0 when no share beat
    MiniLM alone by more than the noise), its NDCG@10 on the decision set and each part's, the whole curve."""

    run_id: str
    model_uri: str
    registered_name: str | None
    registered_version: str | None
    registry_uri: str | None
    name: str
    mix: float
    chosen_mix: float
    score: float
    part_scores: dict[str, float]
    curve: dict[str, float]
    signal: str
    why: str
    margin: dict[str, Any]
    features_version: str
    parts: dict[str, str]
    param_count: int
    seconds: float
    summary: str = ""
