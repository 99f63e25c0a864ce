"""Glue between Airflow task context and the stage functions (settings, run tags, XCom values).

Imported by task functions at run time only; it must stay light (stdlib, pipeline.core.config, pipeline.core.results,
the chain's torch-free declarations).
"""
from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os
import re
import sys
from typing import Any, Mapping

from pipeline.core.config import Settings
from pipeline.core.results import StageResult, to_json_safe

log = logging.getLogger(__name__)

def stage_settings(params: Mapping[str, Any] | None = None) -> Settings:
    """Settings for a stage: the worker's environment (store, MLflow URI, Dask address, DEEPSENT_DEVICE,
    DEEPSENT_GATE_JUDGMENTS), with the run's ``device`` and ``gate_judgments`` params, when set, over them."""
    params = params or {}
    return Settings.from_env(device=params.get("device"), gate_judgments=params.get("gate_judgments"))


def chain_run(params: Mapping[str, Any], context: Mapping[str, Any]) -> Any:
    """The chain's run of one task: the worker's settings, the params' profile and options (the index DAG's params
    name only a model and a seed: the rest keep their defaults), this DAG run's tags; a retried try resumes its
    checkpoint."""
    from deepsent.chain_results import STALE_AFTER_DAYS, STALE_AFTER_REFUSALS, ChainRun
    from deepsent.profiles import resolve_profile

    ti = context["ti"]
    return ChainRun(
        settings=stage_settings(params), profile=resolve_profile(params), seed=params["seed"],
        simulate_days=params.get("simulate_days") or 0,
        ingest_dates=tuple(date_range(params.get("start_date"), params.get("end_date"))),
        judgments=params.get("judgments"), judgments_format=params.get("judgments_format"),
        gate_judgments=params.get("gate_judgments"), force_promotion=bool(params.get("force_promotion")),
        stale_after_refusals=params.get("stale_after_refusals", STALE_AFTER_REFUSALS),
        stale_after_days=params.get("stale_after_days", STALE_AFTER_DAYS),
        tags=run_tags(context), resume=ti.try_number > 1, report_name=report_name(ti.run_id))


def run_tags(context: Mapping[str, Any]) -> dict[str, str]:
    """MLflow tags that lead from an MLflow run back to its Airflow DAG run and task try."""
    ti = context["ti"]
    tags = {
        "airflow.dag_id": str(ti.dag_id),
        "airflow.dag_run_id": str(ti.run_id),
        "airflow.task_id": str(ti.task_id),
        "airflow.map_index": str(ti.map_index),
        "airflow.try_number": str(ti.try_number),
    }
    logical_date = context.get("logical_date")
    if logical_date is not None:
        tags["airflow.logical_date"] = logical_date.isoformat()
    return tags


def xcom_value(result: StageResult | Mapping[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A stage result (anything with ``to_dict()``) or a mapping as plain JSON (paths, numpy numbers and dates
    become str/float), minus ``drop``."""
    value = result.to_dict() if hasattr(result, "to_dict") else result
    return to_json_safe({k: v for k, v in value.items() if k not in drop})


def date_range(start: str | None, end: str | None) -> list[dt.date]:
    """Every day from ``start`` to ``end`` (inclusive); empty when no start is given."""
    from pipeline.core.validators import date_range as days

    if not start:
        return []
    first = dt.date.fromisoformat(start)
    return days(first, dt.date.fromisoformat(end) if end else first, "start_date", "end_date")


def report_name(run_id: str) -> str:
    """A store-safe report folder name for a DAG run (the same on every retry of that run)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"airflow-{run_id}")


def log_result(stage: str, result: StageResult | Mapping[str, Any]) -> None:
    """One log line with a stage's summary (or its keys), so the task log tells what happened."""
    value = xcom_value(result)
    log.info("%s: %s", stage, value.get("summary") or json.dumps(value, sort_keys=True)[:2000])


class _LinesToLog(io.TextIOBase):
    """A text stream that logs every complete line it is given at INFO on ``logger``."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger, self.pending = logger, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        """Log the complete lines of ``pending + text``; keep the unfinished rest."""
        *lines, self.pending = (self.pending + text).split("\n")
        for line in filter(str.strip, lines):
            self.logger.info("%s", line)
        return len(text)


def log_mlflow_at_its_levels() -> None:
    """Route MLflow's messages into the task log at their own level instead of stderr.

    Airflow logs a task's stderr at ERROR, and MLflow writes both its loggers' records and its
    ``eprint`` lines ("Successfully registered model ...") to stderr, so they read ``ERROR - ...``.
    Here MLflow's loggers lose their stderr handler and propagate to the task's log handler, and
    ``eprint`` lines become INFO records of the ``mlflow`` logger; its artifact-download progress bar is
    turned off where stderr is not a terminal (unless ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR`` is set).
    Idempotent; call it in tasks that use MLflow.
    """
    if not sys.stderr.isatty():
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow.utils import logging_utils

    from encoders.model.tracking import adopt_mlflow_loggers

    adopt_mlflow_loggers()
    if not isinstance(logging_utils.MLFLOW_LOGGING_STREAM, _LinesToLog):
        logging_utils.MLFLOW_LOGGING_STREAM = _LinesToLog(logging.getLogger("mlflow"))
