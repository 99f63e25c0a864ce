"""The celery stack, for real: PostgreSQL, Redis, Airflow with CeleryExecutor and two workers, a Dask cluster,
the MLflow server behind its login and the S3 endpoint; and the one retrain of the suite on a real stack.

The stack comes up once for this module and ``deepsent_retrain`` is triggered once through the REST API
(:func:`retrained`); the tests read that run. Every task must succeed, ``train`` and ``encode`` on the ``gpu``
queue's worker and the rest on the ``default`` worker (task instances' ``queue`` and ``hostname``),
``featurize`` on the Dask cluster with the same bytes as a local run; the run is read back through Airflow's
and MLflow's REST APIs (anonymous MLflow calls refused); ``stack down`` leaves no process (checked when the
module ends). The light stack's own test (tests/infra/test_stack.py) brings it up without a DAG run. Durations and the
worker of every task are printed (``pytest -s``). The tests of this module run on one pytest-xdist worker
(``xdist_group``), so the stack comes up once.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest

from infra import stack
from infra.services.celery import celery_node
from infra.services.datastores import postgres_bin_dir
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.infra.rest import STACK_RUN_BUDGET_S, free_port, listeners_beyond_loopback, request, trigger_and_wait

DEEPSENT = str(Path(sys.executable).parent / "deepsent")


def _celery_env(small_data_dir: Path) -> dict[str, str]:
    """A stack folder under /tmp that the ``postgres`` user can enter (pytest's tmp_path is 0700), on free ports."""
    root = Path(tempfile.mkdtemp(prefix="deepsent-celery-stack-"))
    root.chmod(0o755)
    return {**os.environ, "DEEPSENT_STACK_DIR": str(root / "stack"), "DEEPSENT_DATA_DIR": str(small_data_dir),
            "DEEPSENT_RETRAIN_CRON": "",  # else unpausing starts last Monday's run (catchup=False) first
            **{var: str(free_port()) for var in stack.PORT_ENV.values()}}


@pytest.fixture()
def celery_stack_env(small_data_dir: Path) -> Iterator[dict[str, str]]:
    """:func:`_celery_env`, its folder removed afterwards."""
    env = _celery_env(small_data_dir)
    try:
        yield env
    finally:
        shutil.rmtree(Path(env["DEEPSENT_STACK_DIR"]).parent, ignore_errors=True)


def _deepsent_error(env: dict[str, str], *args: str) -> str:
    """The one-line error of a ``deepsent --json ARGS`` that must fail with exit code 2 (and no traceback)."""
    out = subprocess.run([DEEPSENT, *args, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stdout + out.stderr[-2000:]
    return json.loads(out.stdout)["error"]


def test_a_taken_postgres_port_is_refused_before_anything_starts(celery_stack_env: dict[str, str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        celery_stack_env["DEEPSENT_POSTGRES_PORT"] = str(busy.getsockname()[1])
        error = _deepsent_error(celery_stack_env, "stack", "up", "--executor", "celery")
    assert f"port {celery_stack_env['DEEPSENT_POSTGRES_PORT']} for PostgreSQL" in error
    assert "DEEPSENT_POSTGRES_PORT" in error
    assert not (Path(celery_stack_env["DEEPSENT_STACK_DIR"]) / "pids").exists()


def test_status_of_a_stopped_celery_stack_lists_every_service(celery_stack_env: dict[str, str]) -> None:
    out = subprocess.run([DEEPSENT, "stack", "status", "--executor", "celery", "--json"], env=celery_stack_env,
                         capture_output=True, text=True, timeout=120)
    services = json.loads(out.stdout)["services"]
    assert list(services) == list(stack.CELERY_SERVICES) and not any(s["running"] for s in services.values())


@pytest.mark.skipif(os.geteuid() != 0 or postgres_bin_dir() is None, reason="needs root and PostgreSQL installed")
def test_a_stack_folder_postgres_cannot_enter_is_one_clear_line(tmp_path: Path, celery_stack_env: dict[str, str]) -> None:
    """pytest's tmp_path is 0700 root: PostgreSQL, run as user postgres, could not reach its data there."""
    celery_stack_env["DEEPSENT_STACK_DIR"] = str(tmp_path / "stack")
    error = _deepsent_error(celery_stack_env, "stack", "up", "--executor", "celery")
    assert "runs as user 'postgres'" in error and "cannot enter" in error and "DEEPSENT_STACK_DIR" in error
    assert not any((tmp_path / "stack" / "pids").glob("*.pid"))


def _deepsent(env: dict[str, str], *args: str, timeout: float) -> tuple[dict[str, Any], float]:
    """Run ``deepsent --json ARGS``: its JSON and the seconds it took (fails the test on a non-zero exit)."""
    started = time.monotonic()
    out = subprocess.run([DEEPSENT, *args, "--json"], env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    return json.loads(out.stdout), time.monotonic() - started


def _task_instances(run_url: str, token: str) -> list[dict[str, Any]]:
    code, body = request(f"{run_url}/taskInstances?limit=100", token)
    assert code == 200, body
    return body["task_instances"]


def _dask_work(address: str) -> tuple[dict[str, int], set[str]]:
    """Tasks each Dask worker executed, and the task prefixes the scheduler has seen."""
    from dask.distributed import Client

    with Client(address, timeout=30, set_as_default=False) as client:
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
        names = {addr: info["name"] for addr, info in client.scheduler_info()["workers"].items()}
        prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    return {names[addr]: count for addr, count in executed.items()}, set(prefixes)


def _features_match_a_local_run(stack_settings: Settings, local_root: Path, negatives: int, seed: int) -> int:
    """Featurise the stack's pairs again on a local cluster; assert the same files, byte for byte; returns the count."""
    from pipeline.features.featurize import featurize

    remote = Store.from_settings(stack_settings)
    local_settings = Settings.from_env(store=str(local_root), data_dir=str(stack_settings.data_dir), dask_workers=1)
    assert not local_settings.dask_address
    local = Store.from_settings(local_settings)
    for relpath in remote.list_files("pairs"):
        local.write_bytes(relpath, remote.read_bytes(relpath))
    result = featurize(local_settings, negatives=negatives, seed=seed)
    remote_files = remote.list_files(f"features/{result.version}")
    assert remote_files and remote_files == local.list_files(f"features/{result.version}")
    for relpath in remote_files:
        assert remote.read_bytes(relpath) == local.read_bytes(relpath), relpath
    return len(remote_files)


@pytest.fixture(scope="module")
def retrained(small_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The celery stack up, one simulated day, one ``deepsent_retrain`` run triggered through the REST API and
    finished; ``stack down`` afterwards must leave no process and no port behind."""
    from pipeline.simulate.sim_params import SimParams
    from pipeline.simulate.simulate import simulate

    env, day = _celery_env(small_data_dir), dt.date(2026, 4, 6)
    cfg = stack.StackConfig.from_env(env, executor="celery")
    seconds: dict[str, float] = {}
    processes: dict[str, list[int]] = {}
    pids: list[int] = []
    patch = pytest.MonkeyPatch()  # the stack's client environment, for the module's tests too
    try:
        up, seconds["stack up"] = _deepsent(env, "stack", "up", "--executor", "celery", timeout=600)
        pids = [svc["pid"] for svc in up["services"].values()]
        processes = {name: stack.service_processes(svc["pid"]) for name, svc in up["services"].items()}
        for key, value in cfg.client_env().items():
            patch.setenv(key, value)
        settings = Settings.from_env()
        simulate(settings, day, days=1, params=SimParams(searches_per_day=1200, users=2000))
        airflow, token = cfg.url("airflow") + "/api/v2", stack.airflow_token(cfg)
        # The quick profile's chain, shortened: one small LSTM-RNN for one epoch (MiniLM joins it as in make run).
        conf = {"profile": "quick", "models": ["lstm"], "ncell": [8], "epochs": 1, "negatives": 2,
                "start_date": day.isoformat(), "baselines": ["random"]}
        started = time.monotonic()
        # a budget, not a bound: the run shares 2 cores with the suite's other workers (infra/test.sh)
        run_url, state = trigger_and_wait(airflow, token, "deepsent_retrain", conf, timeout=STACK_RUN_BUDGET_S)
        seconds["DAG run"] = time.monotonic() - started
        yield {"env": env, "cfg": cfg, "up": up, "processes": processes, "settings": settings, "airflow": airflow,
               "token": token, "run_url": run_url, "state": state, "seconds": seconds,
               "local_root": tmp_path_factory.mktemp("local-featurize")}
    finally:
        patch.undo()
        down, seconds["stack down"] = _deepsent(env, "stack", "down", timeout=600)
        shutil.rmtree(Path(env["DEEPSENT_STACK_DIR"]).parent, ignore_errors=True)
        print("durations (s): " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
        print("stopped: " + ", ".join(f"{n} {c} processes in {down['seconds'][n]} s" for n, c in down["stopped"].items()))
        assert all(stack.session_members(pid) == [] for pid in pids)
        left = [p for ps in processes.values() for p in ps if (stat := stack.proc_stat(p)) and stat[0] != "Z"]
        assert left == [], left
        assert not any(stack.port_in_use(cfg.host, port) for port in cfg.ports.values())


def _asset_events(retrained: dict[str, Any], run_id: str) -> dict[str, dict[str, Any]]:
    """The extras of the asset events the retrain run ``run_id`` emitted, by asset name (the latest of each), read
    through the REST API."""
    query = urllib.parse.urlencode({"source_dag_id": "deepsent_retrain", "source_run_id": run_id, "limit": 100,
                                    "order_by": "timestamp"})
    code, body = request(f"{retrained['airflow']}/assets/events?{query}", retrained["token"])
    assert code == 200, body
    return {event["name"]: event["extra"] for event in body["asset_events"]}


def _xcom(retrained: dict[str, Any], task: str, map_index: int | None = None) -> Any:
    """A task's return value in the run, read through the REST API."""
    where = f"{retrained['run_url']}/taskInstances/{task}/xcomEntries/return_value"
    code, body = request(where + (f"?map_index={map_index}" if map_index is not None else ""), retrained["token"])
    assert code == 200, body
    return body["value"] if not isinstance(body["value"], str) else json.loads(body["value"])


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.stack
@pytest.mark.xdist_group("celery-stack")
def test_every_task_of_the_retrain_ran_on_its_queue_and_worker(retrained: dict[str, Any]) -> None:
    tis = _task_instances(retrained["run_url"], retrained["token"])
    print("\nprocesses per service: " + ", ".join(f"{n} {len(p)}" for n, p in retrained["processes"].items()))
    print("task              map  state    queue    worker (hostname)        seconds")
    for ti in sorted(tis, key=lambda t: t["start_date"] or ""):
        print(f"{ti['task_id']:<17} {ti['map_index']:>3}  {ti['state']:<8} {ti['queue']:<8} "
              f"{ti['hostname']:<24} {ti['duration'] or 0:7.1f}")
    assert retrained["state"] == "success"
    assert all(ti["state"] == "success" for ti in tis), [(t["task_id"], t["state"]) for t in tis]
    on_gpu = {ti["task_id"] for ti in tis if ti["queue"] == "gpu" and ti["hostname"] == celery_node("gpu")}
    on_default = {ti["task_id"] for ti in tis if ti["queue"] == "default" and ti["hostname"] == celery_node("default")}
    assert on_gpu == {"train", "encode"} and on_default == {ti["task_id"] for ti in tis} - {"train", "encode"}
    processes = [p for ps in retrained["processes"].values() for p in ps]
    assert listeners_beyond_loopback(processes) == []  # no serve-logs on 0.0.0.0:8793 or [::]:8794
    status, _ = _deepsent(retrained["env"], "stack", "status", timeout=120)
    assert status["executor"] == "celery" and list(status["services"]) == list(stack.CELERY_SERVICES)
    assert all(svc["healthy"] for svc in status["services"].values()), status["services"]
    assert status["services"]["mlflow"]["listeners"] == [f"127.0.0.1:{retrained['cfg'].ports['mlflow']}"]


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.stack
@pytest.mark.xdist_group("celery-stack")
def test_featurize_ran_on_the_dask_cluster_with_the_bytes_of_a_local_run(retrained: dict[str, Any],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, token = retrained["cfg"], retrained["token"]
    executed, prefixes = _dask_work(cfg.dask_address)
    print(f"Dask tasks executed per worker: {executed}; task prefixes seen by the scheduler: {sorted(prefixes)}")
    assert set(executed) == {"dask-worker-1", "dask-worker-2"} and sum(executed.values()) > 0
    assert "Receive client connection" in (cfg.root / "logs" / "dask-scheduler.log").read_text()
    code, log = request(f"{retrained['run_url']}/taskInstances/featurize/logs/1?full_content=true", token)
    assert code == 200 and f"connected to Dask scheduler {cfg.dask_address}" in json.dumps(log)
    monkeypatch.delenv("DEEPSENT_DASK_ADDRESS", raising=False)  # the local run: a local cluster
    started = time.monotonic()
    files = _features_match_a_local_run(retrained["settings"], retrained["local_root"], negatives=2, seed=7)
    print(f"features: {files} files byte-identical to a local run in {time.monotonic() - started:.1f} s")


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.stack
@pytest.mark.xdist_group("celery-stack")
def test_the_run_is_read_back_through_the_rest_apis_and_mlflow_refuses_anonymous_calls(
        retrained: dict[str, Any]) -> None:
    cfg, token, run_url = retrained["cfg"], retrained["token"], retrained["run_url"]
    run_id = request(run_url, token)[1]["dag_run_id"]
    trained = _xcom(retrained, "train", map_index=0)
    mlflow_api, login = f"{cfg.url('mlflow')}/api/2.0/mlflow", ("deepsent", cfg.mlflow_secret("admin-password"))
    code, found = request(f"{mlflow_api}/runs/get?run_id={trained['run_id']}", basic=login)
    assert code == 200
    assert request(f"{mlflow_api}/runs/get?run_id={trained['run_id']}")[0] == 401  # anonymous: refused
    code, _ = request(f"{mlflow_api}/registered-models/create", method="POST", body={"name": "anyone"})
    assert code == 401  # no unauthenticated write to the registry
    tags = {t["key"]: t["value"] for t in found["run"]["data"]["tags"]}
    assert tags["airflow.dag_run_id"] == run_id and tags["airflow.task_id"] == "train"
    assert found["run"]["info"]["status"] == "FINISHED"

    ship, promoted, built = (_xcom(retrained, task) for task in ("ship", "promote", "index"))
    # what make run ships, by the same rule: a trained model only when it beats MiniLM off the shelf on the gate set
    assert ship["off_the_shelf"] == (ship["margin"]["ci_low"] <= 0)
    # the suite's first promotion through the DAG (a fresh registry): its champion event names the run and the model
    assert promoted["decision"] == "promoted" and promoted["challenger_uri"] == ship["model_uri"]
    assert promoted["model_uri"] == f"models:/deepsent-ranker/{promoted['version']}"
    events = _asset_events(retrained, run_id)
    champion = events["deepsent_champion"]
    assert champion["dag_run_id"] == run_id and champion["challenger_uri"] == ship["model_uri"]
    assert champion["model_uri"] == promoted["model_uri"]
    assert built["model_uri"] == promoted["model_uri"]  # the chain's index stage indexed the new champion
    assert built["version"] == promoted["version"] and built["count"] > 1000 and built["encoded"] == 0
    assert events["deepsent_index"]["version"] == built["version"]

