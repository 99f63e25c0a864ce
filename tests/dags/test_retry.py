"""Retries: a transient failure after a partial write is retried and leaves no duplicate; bad input is not retried."""
from __future__ import annotations

import datetime as dt
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow.compute as pc
import pytest

from pipeline.core.config import Settings
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store

DAY = dt.date(2026, 3, 2)


def _run_for(day: dt.date) -> datetime:
    """Logical date of the manual run that ingests ``day`` (the last complete day before it)."""
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc) + timedelta(days=1)


def _task_instances(dag_run: Any) -> dict[str, Any]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: (ti.state, ti.try_number) for ti in dag_run.get_task_instances(session=session)}


def test_a_transient_failure_is_retried_without_duplicates(
    dagbag: Any, s3_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest into S3; the first try writes the partition and then 'loses' S3; the retry rewrites it."""
    import pipeline.ingest.ingest

    monkeypatch.setenv("DEEPSENT_STORE", s3_settings.store)
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(s3_settings.data_dir))
    simulate(s3_settings, DAY, days=1, params=SimParams(searches_per_day=300, users=500))
    real_ingest_partition = pipeline.ingest.ingest.ingest_partition
    calls: list[str] = []

    def fail_once_after_writing(store: Store, day: dt.date, files: list[str]) -> dict[str, Any]:
        counts = real_ingest_partition(store, day, files)
        calls.append(day.isoformat())
        if len(calls) == 1:
            raise ConnectionError("injected: S3 connection reset after the partition was written")
        return counts

    monkeypatch.setattr(pipeline.ingest.ingest, "ingest_partition", fail_once_after_writing)
    dag_run = dagbag.get_dag("deepsent_ingest").test(logical_date=_run_for(DAY))

    assert dag_run.state == "success"
    assert _task_instances(dag_run)["ingest"] == ("success", 2)
    assert calls == [DAY.isoformat(), DAY.isoformat()]
    store = Store.from_settings(s3_settings)
    partition = f"clicks/dt={DAY.isoformat()}"
    assert store.list_files(partition) == [f"{partition}/part-0.parquet"]
    table = store.read_table(partition)
    assert table.num_rows > 0
    assert pc.count_distinct(table.column("event_id")).as_py() == table.num_rows


def test_bad_input_fails_at_once_without_retry(dagbag: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A day with no landing partition is an InputError: the retry policy fails the task on its first try."""
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(settings.data_dir))
    conf = {"start_date": "2026-03-05", "models": ["lstm"], "ncell": [8], "epochs": 1}
    dag_run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 3, 9, tzinfo=timezone.utc), run_conf=conf)

    states = _task_instances(dag_run)
    assert dag_run.state == "failed"
    assert states["check_params"] == ("success", 1)
    assert states["ingest"] == ("failed", 1)
    assert states["pairs"][0] == "upstream_failed"
    assert not Store.from_settings(settings).exists("clicks")


def test_a_bad_param_combination_fails_in_the_first_task(dagbag: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    conf = {"start_date": "2026-03-05", "end_date": "2026-03-01"}
    dag_run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 3, 16, tzinfo=timezone.utc), run_conf=conf)

    states = _task_instances(dag_run)
    assert dag_run.state == "failed"
    assert states["check_params"] == ("failed", 1)
    assert states["ingest"][0] == "upstream_failed"
