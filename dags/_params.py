"""Params and task defaults shared by the deepsent DAGs, and the checks and grid built from params.

Params are JSON-schema validated by Airflow: the trigger form shows them with their defaults, and
a trigger (UI or REST) with a value that breaks the schema is refused at once (HTTP 400) with the reason.
Checks a schema cannot express are done by the first task of the run, which fails at once, without
retrying, with one line: a date range out of order, a judged-set file that does not exist, and an
unknown conf key. Airflow 3.3 cannot refuse unknown keys at trigger time: it validates each declared
Param on its own and merges any other conf key in as an untyped param
(``SerializedParamsDict.deep_merge``; apache/airflow#29018), and a DAG file has no hook into that.
"""
from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from _notify import FailureNotifier
from airflow.sdk import Param
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

from encoders.towers.tower_catalog import towers, trainable_tower_names
from eval.baseline_catalog import baseline_names
from pipeline.core.defaults import DEVICES, NEGATIVES, SEED
from pipeline.core.errors import ConfigError
from pipeline.core.validators import date_range

MODEL_TYPES = trainable_tower_names()
BASELINES = baseline_names()
#: The tower setting the ``ncell`` param sets for each recurrent model (its SPEC's first size key).
RECURRENT_SIZE_KEY = {name: spec.size_keys[0] for name, spec in towers().items() if spec.recurrent}

START_DATE = datetime.fromisoformat(os.environ.get("DEEPSENT_START_DATE", "2026-01-01")).replace(tzinfo=timezone.utc)
#: Where GPU training goes: a real deployment routes this queue to GPU workers (CeleryExecutor
#: queues, KubernetesExecutor pod templates) and caps it with the pool. LocalExecutor ignores queues.
TRAIN_QUEUE = os.environ.get("DEEPSENT_TRAIN_QUEUE", "default")
TRAIN_POOL = os.environ.get("DEEPSENT_TRAIN_POOL", "default_pool")

#: Bad data, settings or a missing module fail at once; anything else (S3, network, a killed worker) is retried
#: with exponential backoff. Every stage overwrites its outputs, so a retry never duplicates.
RETRY_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=["pipeline.core.errors.InputError", "pipeline.core.errors.ConfigError", "builtins.ImportError"],
            action=RetryAction.FAIL,
            reason="bad input data, settings or installation: a retry cannot fix it",
        )
    ]
)
DEFAULT_ARGS = {
    "owner": "deepsent",
    "retries": int(os.environ.get("DEEPSENT_TASK_RETRIES", "3")),
    "retry_delay": timedelta(seconds=float(os.environ.get("DEEPSENT_RETRY_DELAY_S", "30"))),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
    "retry_policy": RETRY_POLICY,
    "on_failure_callback": [FailureNotifier()],
}


_OPTIONAL_DATE = {"type": ["null", "string"], "format": "date"}


def ingest_params() -> dict[str, Param]:
    """Params of deepsent_ingest: an optional day that overrides the run's data interval."""
    return {
        "day": Param(None, **_OPTIONAL_DATE, title="Day to ingest",
                     description="YYYY-MM-DD; empty = the start of the run's data interval."),
    }


#: What the default (scheduled) retrain trains: the quick profile's LSTM-RNN (ncell 96) and DSSM, 8 epochs
#: (``deepsent run``, ~3 min on 2 cores). The Table IV grid (every tower, ncell 32/64/96) is a trigger choice.
DEFAULT_MODELS, DEFAULT_NCELL, DEFAULT_EPOCHS = ["lstm", "dssm"], [96], 8
#: How the trigger form shows an empty (null) choice of a nullable enum, instead of the text "null".
_EMPTY_CHOICE = "null"


def retrain_params() -> dict[str, Param]:
    """Params of deepsent_retrain: the model grid, training, evaluation and promotion settings."""
    return {
        "models": Param(DEFAULT_MODELS, type="array", minItems=1, uniqueItems=True,
                        items={"type": "string", "enum": MODEL_TYPES}, examples=MODEL_TYPES,
                        title="Model types", description="Towers to train (one mapped task each); default the quick "
                        "profile's LSTM-RNN and DSSM. The paper's Table IV grid: every trigram tower; minilm fine-tunes "
                        "a pretrained transformer (slow on CPU)."),
        "ncell": Param(DEFAULT_NCELL, type="array", minItems=1, uniqueItems=True,
                       items={"type": "integer", "minimum": 1, "maximum": 4096}, title="Cells (LSTM/RNN/BiLSTM)",
                       description="One run per size for every recurrent tower; Table IV: 32, 64, 96."),
        "negatives": Param(NEGATIVES, type="integer", minimum=1, maximum=64, title="Negatives n",
                           description="Random unclicked titles per clicked pair (paper: 4)."),
        "gamma": Param(10.0, type="number", exclusiveMinimum=0, title="Softmax smoothing γ",
                       description="γ of the loss -log softmax(γ·cosine) over the clicked title and its negatives "
                       "(paper: 10)."),
        "epochs": Param(DEFAULT_EPOCHS, type="integer", minimum=1, maximum=1000, title="Epochs",
                        description="Most passes over the training pairs; early stopping on the validation pairs "
                        "may end sooner."),
        "learning_rate": Param(None, type=["null", "number"], exclusiveMinimum=0, title="Learning rate",
                               description="Empty = the trainer's default step size."),
        "batch_size": Param(None, type=["null", "integer"], minimum=1, title="Batch size",
                            description="Empty = the trainer's default."),
        "seed": Param(SEED, type="integer", minimum=0, title="Seed",
                      description="Of every random choice: pair split, negatives, weights, data order, baselines."),
        "device": Param(None, type=["null", "string"], enum=[None, *DEVICES], title="Device",
                        values_display={_EMPTY_CHOICE: "the worker's DEEPSENT_DEVICE", "auto": "auto (CUDA when present)",
                                        "cpu": "CPU", "cuda": "CUDA GPU"},
                        description="Of every stage (training and embedding); empty = the worker's DEEPSENT_DEVICE."),
        "start_date": Param(None, **_OPTIONAL_DATE, title="First landing day to (re)ingest",
                            description="Optional ad-hoc backfill before training; pairs use every ingested day."),
        "end_date": Param(None, **_OPTIONAL_DATE, title="Last landing day to (re)ingest",
                          description="Empty = the same as the first day."),
        "judgments": Param(None, type=["null", "string"], minLength=1, title="Judged set",
                           description="Path of a judged set; empty = judgments_dev.csv."),
        "judgments_format": Param(None, type=["null", "string"], enum=[None, "homedepot", "generic"],
                                  values_display={_EMPTY_CHOICE: "detect from the file", "homedepot": "Home Depot "
                                                  "(relevance 1-3)", "generic": "generic (query, title, label 0-10)"},
                                  title="Judged-set format", description="Empty = detect from the file's columns."),
        "baselines": Param(None, type=["null", "array"], items={"type": "string", "enum": BASELINES},
                           uniqueItems=True, examples=BASELINES, title="Baselines",
                           description="Empty = the comparison's default list."),
        "gate_judgments": Param(None, type=["null", "string"], minLength=1, title="Promotion gate set",
                                description="Judged set the challenger must beat the champion on; empty = the "
                                "promotion's fixed gate set."),
        "force_promotion": Param(False, type="boolean", title="Force promotion",
                                 description="Make the best model the champion even when it does not beat the "
                                 "current one (a deliberate rollback or reset)."),
    }


def index_params() -> dict[str, Param]:
    """Params of deepsent_index: which model to index (default: the latest promoted champion)."""
    return {
        "model_uri": Param(None, type=["null", "string"], minLength=1, title="Model URI",
                           description="Empty = the champion of the latest deepsent_champion event; else runs:/<id>/"
                           "model, models:/<name>/<N> or models:/<name>@<alias>."),
        "seed": Param(SEED, type="integer", minimum=0, title="Seed",
                      description="Of the index's k-means (IVF, above 200,000 titles); the build is deterministic."),
    }


def unknown_param_errors(conf: dict[str, Any] | None, declared: dict[str, Any]) -> list[str]:
    """One error naming the conf keys that are not params of the DAG, and the ones that are (empty when none)."""
    unknown = sorted(set(conf or {}) - set(declared))
    if not unknown:
        return []
    return [f"unknown param{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(declared))})"]


def retrain_param_errors(params: dict[str, Any]) -> list[str]:
    """What is wrong with a schema-valid set of retrain params (empty when nothing is)."""
    errors = []
    start, end = params.get("start_date"), params.get("end_date")
    if end and not start:
        errors.append("end_date is set but start_date is empty")
    if start and end:
        try:
            date_range(date.fromisoformat(start), date.fromisoformat(end), "start_date", "end_date")
        except ConfigError as exc:
            errors.append(str(exc))
    for name in ("judgments", "gate_judgments"):
        path = params.get(name)
        if path and "://" not in path and not Path(path).is_file():
            errors.append(f"{name}: no such file {path}")
    return errors


def training_grid(params: dict[str, Any], features_version: str) -> list[dict[str, Any]]:
    """``encoders.training.trainer.TrainConfig`` fields per grid point: every model, every ``ncell`` if recurrent.

    The device is not a training field: it reaches every task through its settings (``stage_settings``).
    """
    common = {k: params[k] for k in ("negatives", "gamma", "epochs", "seed")}
    common.update({k: params[p] for k, p in (("lr", "learning_rate"), ("batch_size", "batch_size")) if params.get(p)})
    grid = []
    for model in params["models"]:
        sizes = [{RECURRENT_SIZE_KEY[model]: n} for n in params["ncell"]] if model in RECURRENT_SIZE_KEY else [{}]
        grid += [{**common, "model": model, "tower": size, "features_version": features_version} for size in sizes]
    return grid
