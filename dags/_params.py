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

from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from _notify import FailureNotifier
from airflow.sdk import Param
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

from deepsent.chain_results import STALE_AFTER_DAYS, STALE_AFTER_REFUSALS
from deepsent.profiles import DEFAULT_PROFILE, PROFILES, resolve_profile
from encoders.towers.tower_catalog import trainable_tower_names
from eval.baseline_catalog import baseline_names
from pipeline.core.defaults import DEVICES, GAMMA, GATE_CLICKS, GATE_SLICE, NEGATIVES, SEED
from pipeline.core.errors import ConfigError
from pipeline.core.validators import date_range, env_setting, iso_date, name_text, non_negative_int, seconds

MODEL_TYPES = trainable_tower_names()
BASELINES = baseline_names()

_START = env_setting("DEEPSENT_START_DATE", "2026-01-01", iso_date)
START_DATE = datetime(_START.year, _START.month, _START.day, tzinfo=timezone.utc)
#: Where GPU training goes: a real deployment routes this queue to GPU workers (CeleryExecutor
#: queues, KubernetesExecutor pod templates) and caps it with the pool. LocalExecutor ignores queues.
TRAIN_QUEUE = env_setting("DEEPSENT_TRAIN_QUEUE", "default", name_text("a queue name"))
TRAIN_POOL = env_setting("DEEPSENT_TRAIN_POOL", "default_pool", name_text("a pool name"))

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
    "retries": env_setting("DEEPSENT_TASK_RETRIES", "3", non_negative_int),
    "retry_delay": timedelta(seconds=env_setting("DEEPSENT_RETRY_DELAY_S", "30", seconds("a retry delay in seconds"))),
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


#: How the trigger form shows an empty (null) choice of a nullable enum, instead of the text "null".
_EMPTY_CHOICE = "null"
_PROFILE_DEFAULT = "Empty = the profile's."


def retrain_params() -> dict[str, Param]:
    """Params of deepsent_retrain: the profile (``deepsent run``'s own), overrides of its grid, evaluation, promotion."""
    return {
        "profile": Param(DEFAULT_PROFILE, type="string", enum=list(PROFILES), title="Profile",
                         description="What to train and compare, as deepsent run --profile: quick (the LSTM-RNN and "
                         "DSSM, the ensemble) or full (the paper's Table IV grid, MiniLM fine-tuned)."),
        "models": Param(None, type=["null", "array"], minItems=1, uniqueItems=True,
                        items={"type": "string", "enum": MODEL_TYPES}, examples=MODEL_TYPES,
                        title="Model types", description="Replace the profile's grid: these towers (one mapped task "
                        "each), every recurrent one at each of the cells below. " + _PROFILE_DEFAULT),
        "ncell": Param(None, type=["null", "array"], minItems=1, uniqueItems=True,
                       items={"type": "integer", "minimum": 1, "maximum": 4096}, title="Cells (LSTM/RNN/BiLSTM)",
                       description="One run per size for every recurrent tower; Table IV: 32, 64, 96. " + _PROFILE_DEFAULT),
        "negatives": Param(None, type=["null", "integer"], minimum=1, maximum=64, title="Negatives n",
                           description=f"Random unclicked titles per clicked pair (paper: {NEGATIVES}). " + _PROFILE_DEFAULT),
        "gamma": Param(None, type=["null", "number"], exclusiveMinimum=0, title="Softmax smoothing γ",
                       description=f"γ of the loss -log softmax(γ·cosine) (paper: {GAMMA:g}). " + _PROFILE_DEFAULT),
        "epochs": Param(None, type=["null", "integer"], minimum=1, maximum=1000, title="Epochs",
                        description="Most passes over the training pairs of every grid point. " + _PROFILE_DEFAULT),
        "patience": Param(None, type=["null", "integer"], minimum=1, maximum=1000, title="Patience",
                          description="Epochs without a better validation loss before stopping. " + _PROFILE_DEFAULT),
        "learning_rate": Param(None, type=["null", "number"], exclusiveMinimum=0, title="Learning rate",
                               description="Empty = each tower's own step size."),
        "batch_size": Param(None, type=["null", "integer"], minimum=1, title="Batch size",
                            description="Empty = the trainer's default."),
        "seed": Param(SEED, type="integer", minimum=0, title="Seed",
                      description="Of every random choice: pair split, negatives, weights, data order, baselines."),
        "device": Param(None, type=["null", "string"], enum=[None, *DEVICES], title="Device",
                        values_display={_EMPTY_CHOICE: "the worker's DEEPSENT_DEVICE", "auto": "auto (CUDA when present)",
                                        "cpu": "CPU", "cuda": "CUDA GPU"},
                        description="Of every stage (training and embedding); empty = the worker's DEEPSENT_DEVICE."),
        "simulate_days": Param(0, type="integer", minimum=0, maximum=366, title="Simulated days",
                               description="Days of simulated landing logs to write first (the demo's click source, "
                               "as deepsent run does); 0 = none: the search engine fills the landing area."),
        "start_date": Param(None, **_OPTIONAL_DATE, title="First landing day to (re)ingest",
                            description="Optional ad-hoc backfill before training; pairs use every ingested day."),
        "end_date": Param(None, **_OPTIONAL_DATE, title="Last landing day to (re)ingest",
                          description="Empty = the same as the first day."),
        "judgments": Param(None, type=["null", "string"], minLength=1, title="Judged set",
                           description="Path of the judged set the table reports; empty = judgments_dev.csv."),
        "judgments_format": Param(None, type=["null", "string"], enum=[None, "homedepot", "generic"],
                                  values_display={_EMPTY_CHOICE: "detect from the file", "homedepot": "Home Depot "
                                                  "(relevance 1-3)", "generic": "generic (query, title, label 0-10)"},
                                  title="Judged-set format", description="Empty = detect from the file's columns."),
        "baselines": Param(None, type=["null", "array"], items={"type": "string", "enum": BASELINES},
                           uniqueItems=True, examples=BASELINES, title="Baselines", description=_PROFILE_DEFAULT),
        "gate_judgments": Param(None, type=["null", "string"], minLength=1, title="Decision (gate) set",
                                description="The judged set every decision is made on (the ensemble's mix, the ship "
                                "choice, the promotion gate, the served mode): gate-slice (the demo's golden set), a "
                                "judged file of your own (never the reported one), or clicks (the held-out click "
                                "lists); empty = DEEPSENT_GATE_JUDGMENTS, else gate-slice."),
        "force_promotion": Param(False, type="boolean", title="Force promotion",
                                 description="Make the shipped model the champion even when it does not beat the "
                                 "current one (a deliberate rollback or reset)."),
        "stale_after_refusals": Param(STALE_AFTER_REFUSALS, type="integer", minimum=1, title="Stale after refusals",
                                      description="Notify (DEEPSENT_NOTIFY) when this many retrained challengers in a "
                                      "row were refused."),
        "stale_after_days": Param(STALE_AFTER_DAYS, type="number", exclusiveMinimum=0, title="Stale after days",
                                  description="Notify when the champion is older than this."),
    }


def index_params() -> dict[str, Param]:
    """Params of deepsent_index: which model to index (default: the latest promoted champion)."""
    return {
        "model_uri": Param(None, type=["null", "string"], minLength=1, title="Model URI",
                           description="Empty = the champion of the latest deepsent_champion event; else runs:/<id>/"
                           "model, models:/<name>/<N> or models:/<name>@<alias>."),
        "seed": Param(SEED, type="integer", minimum=0, title="Seed",
                      description="Of the index's k-means (IVF, above 20,000 titles); the build is deterministic."),
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
    try:
        resolve_profile(params)
    except ConfigError as exc:
        errors.append(str(exc))
    for name in ("judgments", "gate_judgments"):
        path = params.get(name)
        if path and "://" not in path and path not in (GATE_SLICE, GATE_CLICKS) and not Path(path).is_file():
            errors.append(f"{name}: no such file {path}")
    return errors
