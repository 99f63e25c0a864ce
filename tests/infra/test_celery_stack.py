"""The celery stack, for real: PostgreSQL, Redis, Airflow with CeleryExecutor and two workers, a Dask cluster.

``deepsent_retrain`` is triggered through the REST API; every task must succeed, ``train`` on the ``gpu``
queue's worker and the rest on the ``default`` worker (task instances' ``queue`` and ``hostname``),
``featurize`` on the Dask cluster with the same bytes as a local run; ``stack down`` leaves no process.
Durations and the worker of every task are printed (``pytest -s``).
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
from pathlib import Path
from typing import Any, Iterator

import pytest

from infra import stack
from infra.services.celery import celery_node
from infra.services.datastores import postgres_bin_dir
from pipeline.core.config import Settings
from pipeline.core.store import Store
from tests.infra.rest import STACK_RUN_BUDGET_S, free_port, listeners_beyond_loopback, request, trigger_and_wait

DEEPSENT = str(Path(sys.executable).parent / "deepsent")


@pytest.fixture()
def celery_stack_env(small_data_dir: Path) -> Iterator[dict[str, str]]:
    """A stack folder under /tmp that the ``postgres`` user can enter (pytest's tmp_path is 0700), on free ports."""
    root = Path(tempfile.mkdtemp(prefix="deepsent-celery-stack-"))
    root.chmod(0o755)
    env = {**os.environ, "DEEPSENT_STACK_DIR": str(root / "stack"), "DEEPSENT_DATA_DIR": str(small_data_dir),
           "DEEPSENT_RETRAIN_CRON": "",  # else unpausing starts last Monday's run (catchup=False) first
           **{var: str(free_port()) for var in stack.PORT_ENV.values()}}
    try:
        yield env
    finally:
        shutil.rmtree(root, ignore_errors=True)


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


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.stack
def test_retrain_on_the_celery_stack(celery_stack_env: dict[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.simulate.sim_params import SimParams
    from pipeline.simulate.simulate import simulate

    env, day = celery_stack_env, dt.date(2026, 4, 6)
    cfg = stack.StackConfig.from_env(env, executor="celery")
    seconds: dict[str, float] = {}
    pids: list[int] = []
    processes: dict[str, list[int]] = {}
    try:
        up, seconds["stack up"] = _deepsent(env, "stack", "up", "--executor", "celery", timeout=600)
        pids = [svc["pid"] for svc in up["services"].values()]
        processes = {name: stack.service_processes(svc["pid"]) for name, svc in up["services"].items()}
        assert listeners_beyond_loopback([p for ps in processes.values() for p in ps]) == []
        print("\nprocesses per service: " + ", ".join(f"{n} {len(p)}" for n, p in processes.items()))
        status, _ = _deepsent(env, "stack", "status", timeout=120)
        assert status["executor"] == "celery" and list(status["services"]) == list(stack.CELERY_SERVICES)
        assert all(svc["healthy"] for svc in status["services"].values()), status["services"]

        for key, value in cfg.client_env().items():
            monkeypatch.setenv(key, value)
        settings = Settings.from_env()
        simulate(settings, day, days=1, params=SimParams(searches_per_day=1200, users=2000))

        airflow, token = cfg.url("airflow") + "/api/v2", stack.airflow_token(cfg)
        conf = {"models": ["lstm"], "ncell": [8], "epochs": 1, "negatives": 2, "start_date": day.isoformat(),
                "baselines": ["random"]}
        started = time.monotonic()
        run_url, state = trigger_and_wait(airflow, token, "deepsent_retrain", conf, timeout=STACK_RUN_BUDGET_S)
        seconds["DAG run"] = time.monotonic() - started
        tis = _task_instances(run_url, token)
        print("task              map  state    queue    worker (hostname)        seconds")
        for ti in sorted(tis, key=lambda t: t["start_date"] or ""):
            print(f"{ti['task_id']:<17} {ti['map_index']:>3}  {ti['state']:<8} {ti['queue']:<8} "
                  f"{ti['hostname']:<24} {ti['duration'] or 0:7.1f}")
        assert state == "success"
        assert all(ti["state"] == "success" for ti in tis), [(t["task_id"], t["state"]) for t in tis]
        on_gpu = {ti["task_id"] for ti in tis if ti["queue"] == "gpu" and ti["hostname"] == celery_node("gpu")}
        on_default = {ti["task_id"] for ti in tis if ti["queue"] == "default" and ti["hostname"] == celery_node("default")}
        assert on_gpu == {"train", "encode"} and on_default == {ti["task_id"] for ti in tis} - {"train", "encode"}

        executed, prefixes = _dask_work(cfg.dask_address)
        print(f"Dask tasks executed per worker: {executed}; task prefixes seen by the scheduler: {sorted(prefixes)}")
        assert set(executed) == {"dask-worker-1", "dask-worker-2"} and sum(executed.values()) > 0
        assert "Receive client connection" in (cfg.root / "logs" / "dask-scheduler.log").read_text()
        code, log = request(f"{run_url}/taskInstances/featurize/logs/1?full_content=true", token)
        assert code == 200 and f"connected to Dask scheduler {cfg.dask_address}" in json.dumps(log)
        monkeypatch.delenv("DEEPSENT_DASK_ADDRESS")  # the local run: a local cluster
        started = time.monotonic()
        files = _features_match_a_local_run(settings, tmp_path / "local-store", negatives=2, seed=7)
        seconds["local featurize + compare"] = time.monotonic() - started
        print(f"features: {files} files byte-identical to a local run")
    finally:
        down, seconds["stack down"] = _deepsent(env, "stack", "down", timeout=600)
        print("durations (s): " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
        print("stopped: " + ", ".join(f"{n} {c} processes in {down['seconds'][n]} s" for n, c in down["stopped"].items()))
        assert all(stack.session_members(pid) == [] for pid in pids)
        left = [p for ps in processes.values() for p in ps if (stat := stack.proc_stat(p)) and stat[0] != "Z"]
        assert left == [], left
        assert not any(stack.port_in_use(cfg.host, port) for port in cfg.ports.values())
