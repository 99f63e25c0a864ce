"""Airflow for the DAG tests: a private AIRFLOW_HOME (SQLite) migrated once, the real dags/ folder.

Airflow reads its configuration when first imported, so the environment is set here, before any
test module of this folder imports it.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import PROJECT_ROOT, Settings

DAGS_FOLDER = PROJECT_ROOT / "dags"
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="deepsent-airflow-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ.update({
    "AIRFLOW_HOME": str(_AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    # Tests retry after 1 s instead of 30 s (the DAG files read this at parse time).
    "DEEPSENT_RETRY_DELAY_S": "1",
    # Two new days of clicks start a retrain (the end-to-end test ingests two days).
    "DEEPSENT_RETRAIN_EVERY_DAYS": "2",
})


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """AIRFLOW_HOME with a migrated metadata DB (``airflow db migrate``, a few seconds, once)."""
    airflow = Path(sys.executable).parent / "airflow"
    proc = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _AIRFLOW_HOME


@pytest.fixture(scope="session")
def dagbag(airflow_db: Path) -> Any:
    """Every DAG of dags/, parsed the way the DAG processor parses a bundle."""
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=str(DAGS_FOLDER), bundle_name="dags-folder")


@pytest.fixture()
def stage_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Point the stage functions inside tasks (Settings.from_env) at the test's store and MLflow."""
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    monkeypatch.setenv("DEEPSENT_DASK_WORKERS", "1")
    monkeypatch.setenv("DEEPSENT_DEVICE", "cpu")
    return Settings.from_env()
