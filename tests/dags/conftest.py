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
from datetime import datetime, timezone
from typing import Any, NamedTuple

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

    bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=str(DAGS_FOLDER), bundle_name="dags-folder")
    bag.declared_params = _declared(bag)  # before any run: what _dag_params_restored restores
    return bag


def _declared(bag: Any) -> list[tuple[Any, Any]]:
    """Every Param object of the bag's DAGs and tasks with the value it was parsed with."""
    holders = [holder for dag in bag.dags.values() for holder in (dag, *dag.tasks) if getattr(holder, "params", None)]
    return [(param, param.value) for holder in holders for _, param in holder.params.items()]


@pytest.fixture(autouse=True)
def _dag_params_restored(request: pytest.FixtureRequest) -> Any:
    """Each test runs on the DAGs' declared param values, and leaves them so: an in-process ``dag.test(run_conf=...)``
    writes the run's conf into the parsed DAG's Param objects (Airflow's ``process_params`` resolves them in place),
    and the session's dagbag (or a session fixture's run, set up before this) would hand that conf on."""
    if "dagbag" not in request.fixturenames:
        yield
        return
    declared = request.getfixturevalue("dagbag").declared_params
    for param, value in declared:
        param.value = value
    yield
    for param, value in declared:
        param.value = value


@pytest.fixture()
def stage_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Point the stage functions inside tasks (Settings.from_env) at the test's store and MLflow."""
    for name, value in stage_environment(settings).items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def retrain_conf(**changes: Any) -> dict[str, Any]:
    """Every retrain param: its default, then the tiny chain's, then ``changes``."""
    from _params import retrain_params

    from tests.tiny_chain import TINY_CONF

    return {**{name: param.value for name, param in retrain_params().items()}, **TINY_CONF, **changes}


def xcoms(run_id: str, task_id: str) -> dict[int, Any]:
    """Return values of a task in a DAG run of this worker's Airflow database, by map index (-1 when not mapped)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=run_id, key="return_value", task_ids=task_id))
        return {row.map_index: XComModel.deserialize_value(row) for row in rows}


def asset_extras(name: str) -> list[dict[str, Any]]:
    """The extras of asset ``name``'s events in this worker's Airflow database, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.name == name)
        return [dict(extra) for extra in session.scalars(query.order_by(AssetEvent.id))]


class DagRun(NamedTuple):
    """A finished DAG run of this worker's Airflow database: its id and state, the settings its tasks ran with, and
    the notifications it sent (``DEEPSENT_NOTIFY``'s file)."""

    run_id: str
    state: str
    settings: Settings
    notifications: Path


#: The tests that read :func:`tiny_dag_run` run on one pytest-xdist worker: the run's XComs and asset events
#: live in that worker's Airflow database.
TINY_DAG_GROUP = pytest.mark.xdist_group("tiny-dag-run")


@pytest.fixture(scope="session")
def tiny_dag_run(dagbag: Any, tmp_path_factory: pytest.TempPathFactory, tiny_chain: Any) -> DagRun:
    """``deepsent_retrain`` (``dag.test()``) of the tiny chain's params on a copy of the store ``deepsent run`` left
    (``tiny_chain``: its landed days, its registry with the champion it promoted), once per worker that asks (mark
    its readers with :data:`TINY_DAG_GROUP` so that is one): the suite's one retrain through the DAG, a challenger
    from one door against the other's champion, with a limit of one refusal before the champion is stale. The
    end-to-end and the two-doors tests read it."""
    from tests.tiny_chain import copy_of

    root = tmp_path_factory.mktemp("tiny-dag-run")
    settings = copy_of(tiny_chain, Settings(store=str(root / "store"), data_dir=tiny_chain.settings.data_dir,
                                            mlflow_tracking_uri="", dask_workers=1, device="cpu"))  # copy_of sets it
    notifications = root / "notify.jsonl"
    with pytest.MonkeyPatch.context() as patch:  # the stage functions inside tasks read Settings.from_env
        for name, value in {**stage_environment(settings), "DEEPSENT_NOTIFY": f"file:{notifications}"}.items():
            patch.setenv(name, value)
        run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 2, 9, 3, tzinfo=timezone.utc),
                                                      run_conf=retrain_conf(simulate_days=0, stale_after_refusals=1))
    import mlflow

    mlflow.set_tracking_uri(None)
    return DagRun(run.run_id, run.state, settings, notifications)


def stage_environment(settings: Settings) -> dict[str, str]:
    """The environment that points the stage functions inside tasks (``Settings.from_env``) at ``settings``."""
    return {"DEEPSENT_STORE": settings.store, "DEEPSENT_DATA_DIR": str(settings.data_dir),
            "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri, "DEEPSENT_DASK_WORKERS": "1", "DEEPSENT_DEVICE": "cpu"}
