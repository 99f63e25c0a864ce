"""Params, assets and task defaults shared by the deepsent DAGs, and the checks and grid built from params.

Params are JSON-schema validated by Airflow: the trigger form shows them with their defaults, and
a trigger (UI or REST) with a value that breaks the schema is refused at once with the reason.
Checks a schema cannot express (a date range in order, a judged-set file that exists) are done
by the first task of the run, which fails without retrying.
"""
from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from typing import Any

from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable, Param
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

from encoders.catalog import tower_names, towers
from eval.catalog import baseline_names
from pipeline.defaults import DEVICES, NEGATIVES, SEED
from pipeline.errors import ConfigError
from pipeline.validators import date_range

MODEL_TYPES = tower_names()
BASELINES = baseline_names()
#: The tower setting the ``ncell`` param sets for each recurrent model (its SPEC's first size key).
RECURRENT_SIZE_KEY = {name: spec.size_keys[0] for name, spec in towers().items() if spec.recurrent}

#: The click table (clicks/dt=.../), updated by every ingest run; it triggers deepsent_retrain.
CLICKS = Asset(name="deepsent_clicks", uri="x-deepsent://store/clicks", group="deepsent")
#: The published comparison table (reports/latest/), updated by every retrain run.
REPORT = Asset(name="deepsent_report", uri="x-deepsent://store/reports/latest", group="deepsent")

START_DATE = datetime.fromisoformat(os.environ.get("DEEPSENT_START_DATE", "2026-01-01")).replace(tzinfo=timezone.utc)
#: Weekly, Monday 03:00 UTC. Empty = no time schedule: retrain only on new clicks (or by hand).
RETRAIN_CRON = os.environ.get("DEEPSENT_RETRAIN_CRON", "0 3 * * 1")
#: Where GPU training goes: a real deployment routes this queue to GPU workers (CeleryExecutor
#: queues, KubernetesExecutor pod templates) and caps it with the pool. LocalExecutor ignores queues.
TRAIN_QUEUE = os.environ.get("DEEPSENT_TRAIN_QUEUE", "default")
TRAIN_POOL = os.environ.get("DEEPSENT_TRAIN_POOL", "default_pool")

#: Bad data, settings or a missing module fail at once; anything else (S3, network, a killed worker) is retried
#: with exponential backoff. Every stage overwrites its outputs, so a retry never duplicates.
RETRY_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=["pipeline.errors.InputError", "pipeline.errors.ConfigError", "builtins.ImportError"],
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
}


def retrain_schedule() -> Any:
    """Retrain on ``RETRAIN_CRON`` or whenever the click table is updated, whichever comes first."""
    if not RETRAIN_CRON:
        return CLICKS
    return AssetOrTimeSchedule(timetable=CronTriggerTimetable(RETRAIN_CRON, timezone="UTC"), assets=CLICKS)


_OPTIONAL_DATE = {"type": ["null", "string"], "format": "date"}


def ingest_params() -> dict[str, Param]:
    """Params of deepsent_ingest: an optional day that overrides the run's data interval."""
    return {
        "day": Param(None, **_OPTIONAL_DATE, title="Day to ingest",
                     description="YYYY-MM-DD; empty = the start of the run's data interval."),
    }


def retrain_params() -> dict[str, Param]:
    """Params of deepsent_retrain: the model grid, training and evaluation settings."""
    return {
        "models": Param(["lstm", "dssm", "clsm", "rnn", "bilstm"], type="array", minItems=1, uniqueItems=True,
                        items={"type": "string", "enum": MODEL_TYPES}, examples=MODEL_TYPES,
                        title="Model types", description="Towers to train (one mapped task each)."),
        "ncell": Param([32, 64, 96], type="array", minItems=1, uniqueItems=True,
                       items={"type": "integer", "minimum": 1, "maximum": 4096},
                       title="Cells (LSTM/RNN/BiLSTM)", description="One run per size for every recurrent tower."),
        "negatives": Param(NEGATIVES, type="integer", minimum=1, maximum=64, title="Negatives n",
                           description="Random unclicked titles per clicked pair (paper: 4)."),
        "gamma": Param(10.0, type="number", exclusiveMinimum=0, title="Softmax smoothing γ"),
        "epochs": Param(5, type="integer", minimum=1, maximum=1000, title="Epochs"),
        "learning_rate": Param(None, type=["null", "number"], exclusiveMinimum=0, title="Learning rate",
                               description="Empty = the trainer's default step size."),
        "batch_size": Param(None, type=["null", "integer"], minimum=1, title="Batch size",
                            description="Empty = the trainer's default."),
        "seed": Param(SEED, type="integer", minimum=0, title="Seed"),
        "device": Param(None, type=["null", "string"], enum=[None, *DEVICES], title="Device",
                        description="Of every stage (training and embedding); empty = the worker's DEEPSENT_DEVICE."),
        "start_date": Param(None, **_OPTIONAL_DATE, title="First landing day to (re)ingest",
                            description="Optional ad-hoc backfill before training; pairs use every ingested day."),
        "end_date": Param(None, **_OPTIONAL_DATE, title="Last landing day to (re)ingest",
                          description="Empty = the same as the first day."),
        "judgments": Param(None, type=["null", "string"], minLength=1, title="Judged set",
                           description="Path of a judged set; empty = judgments_dev.csv."),
        "judgments_format": Param(None, type=["null", "string"], enum=[None, "homedepot", "generic"],
                                  title="Judged-set format", description="Empty = detect."),
        "baselines": Param(None, type=["null", "array"], items={"type": "string", "enum": BASELINES},
                           uniqueItems=True, examples=BASELINES, title="Baselines",
                           description="Empty = the comparison's default list."),
    }


def retrain_param_errors(params: dict[str, Any]) -> list[str]:
    """What is wrong with a schema-valid set of retrain params (empty when nothing is)."""
    errors = []
    start, end, judgments = params.get("start_date"), params.get("end_date"), params.get("judgments")
    if end and not start:
        errors.append("end_date is set but start_date is empty")
    if start and end:
        try:
            date_range(date.fromisoformat(start), date.fromisoformat(end), "start_date", "end_date")
        except ConfigError as exc:
            errors.append(str(exc))
    if judgments and "://" not in judgments and not Path(judgments).is_file():
        errors.append(f"judgments: no such file {judgments}")
    return errors


def training_grid(params: dict[str, Any], features_version: str) -> list[dict[str, Any]]:
    """``encoders.trainer.TrainConfig`` fields per grid point: every model, every ``ncell`` if recurrent.

    The device is not a training field: it reaches every task through its settings (``stage_settings``).
    """
    common = {k: params[k] for k in ("negatives", "gamma", "epochs", "seed")}
    common.update({k: params[p] for k, p in (("lr", "learning_rate"), ("batch_size", "batch_size")) if params.get(p)})
    grid = []
    for model in params["models"]:
        sizes = [{RECURRENT_SIZE_KEY[model]: n} for n in params["ncell"]] if model in RECURRENT_SIZE_KEY else [{}]
        grid += [{**common, "model": model, "tower": size, "features_version": features_version} for size in sizes]
    return grid
