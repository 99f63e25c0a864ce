"""Glue between Airflow task context and the stage functions (settings, run tags, XCom values).

Imported by task functions at run time only; it must stay light (stdlib, pipeline.config, pipeline.results).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
from typing import Any, Mapping

from pipeline.config import Settings
from pipeline.results import StageResult, to_json_safe

log = logging.getLogger(__name__)


def stage_settings(params: Mapping[str, Any] | None = None) -> Settings:
    """Settings for a stage: the worker's environment (store, MLflow URI, Dask address, DEEPSENT_DEVICE),
    with the run's ``device`` param, when set, as the device of every stage."""
    return Settings.from_env(device=(params or {}).get("device"))


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
    """A stage result as plain JSON (its ``to_dict()``; paths, numpy numbers and dates become str/float), minus ``drop``."""
    value = result.to_dict() if isinstance(result, StageResult) else result
    return to_json_safe({k: v for k, v in value.items() if k not in drop})


def date_range(start: str | None, end: str | None) -> list[dt.date]:
    """Every day from ``start`` to ``end`` (inclusive); empty when no start is given."""
    from pipeline.validators import date_range as days

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
