"""The local (light) stack: clear errors, whole-group shutdown, and (services) the stack up, watched and down."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from infra import stack
from pipeline.core.config import PROJECT_ROOT
from tests.infra.rest import free_port, listeners_beyond_loopback, poll, request

DEEPSENT = str(Path(sys.executable).parent / "deepsent")
DEEPSENT_PYTHON = sys.executable


@pytest.fixture()
def stack_env(tmp_path: Path, small_data_dir: Path) -> dict[str, str]:
    """Environment for a stack in ``tmp_path`` on free ports, on a small corpus (the gate encodes it with MiniLM)."""
    return {**os.environ, "DEEPSENT_STACK_DIR": str(tmp_path / "stack"), "DEEPSENT_DATA_DIR": str(small_data_dir),
            **{var: str(free_port()) for var in stack.PORT_ENV.values()}}


@pytest.fixture()
def busy_port() -> Iterator[int]:
    """A port some other process (this one) listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_taken_port_is_refused_with_a_clear_message(stack_env: dict[str, str], busy_port: int) -> None:
    stack_env["DEEPSENT_AIRFLOW_PORT"] = str(busy_port)
    out = subprocess.run([DEEPSENT, "stack", "up", "--json"], env=stack_env, capture_output=True, text=True, timeout=60)

    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert f"port {busy_port} for Airflow" in error and "DEEPSENT_AIRFLOW_PORT" in error
    assert "Traceback" not in out.stderr
    assert not (Path(stack_env["DEEPSENT_STACK_DIR"]) / "pids").exists()  # nothing was started


def test_status_of_a_stopped_stack_and_a_stale_pid_file(stack_env: dict[str, str]) -> None:
    cfg = stack.StackConfig.from_env(stack_env)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (cfg.root / "pids").mkdir(parents=True)
    (cfg.root / "pids" / "mlflow.pid").write_text(f"{dead.pid}\n")

    report = stack.status(cfg)
    assert {name: svc["running"] for name, svc in report["services"].items()} == dict.fromkeys(stack.SERVICES, False)
    assert not (cfg.root / "pids" / "mlflow.pid").exists()
    out = subprocess.run([DEEPSENT, "stack", "status", "--json"], env=stack_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and set(json.loads(out.stdout)["services"]) == set(stack.SERVICES)


def test_a_garbled_pid_file_never_signals_anything(stack_env: dict[str, str]) -> None:
    """An empty pid file must not become ``killpg(0)`` (which would signal the caller's own group)."""
    cfg = stack.StackConfig.from_env(stack_env)
    (cfg.root / "pids").mkdir(parents=True)
    for name, text in zip(stack.SERVICES, ("", "0\n", "not a pid")):
        (cfg.root / "pids" / f"{name}.pid").write_text(text)
    assert stack.down(cfg, grace=1.0)["stopped"] == dict.fromkeys(stack.SERVICES, 0)
    assert list((cfg.root / "pids").iterdir()) == []


def test_down_stops_every_process_of_a_service(stack_env: dict[str, str]) -> None:
    """A service whose children start their own process group is still stopped completely."""
    cfg = stack.StackConfig.from_env(stack_env)
    own_group = f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); time.sleep(300)'"
    script = f"sleep 300 & {own_group} & trap '' TERM; sleep 300"  # the shell ignores SIGTERM: needs SIGKILL
    leader = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    (cfg.root / "pids").mkdir(parents=True)
    (cfg.root / "pids" / "s3.pid").write_text(f"{leader.pid}\n")
    deadline = time.monotonic() + 10
    groups = lambda: {stack._proc_stat(p)[1] for p in stack.session_members(leader.pid)}  # noqa: E731
    while len(groups()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(stack.session_members(leader.pid)) == 4 and len(groups()) == 2

    result = stack.down(cfg, grace=1.0)
    assert result["stopped"]["s3"] == 4
    assert stack.session_members(leader.pid) == []
    assert not (cfg.root / "pids" / "s3.pid").exists()


# ---- the real stack ------------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.slow
@pytest.mark.stack
@pytest.mark.budget("brings the light stack up, waits for a killed service's restart, and stops it whole")
def test_the_light_stack_serves_on_loopback_restarts_a_dead_service_and_stops_whole(stack_env: dict[str, str]) -> None:
    """Up, watched and down, without a DAG run: the suite's one retrain on a stack is the celery stack's
    (tests/infra/test_celery_stack.py), which has every service of this one and more."""
    stack_env["DEEPSENT_RETRAIN_CRON"] = ""  # else unpausing starts last Monday's run (catchup=False) first
    cfg = stack.StackConfig.from_env(stack_env)
    pids: list[int] = []
    try:
        up = subprocess.run([DEEPSENT, "stack", "up", "--json"], env=stack_env, capture_output=True, text=True, timeout=420)
        assert up.returncode == 0, up.stdout + up.stderr[-3000:]
        pids = [svc["pid"] for svc in json.loads(up.stdout)["services"].values()]
        every = [p for pid in pids for p in stack.service_processes(pid)]
        assert listeners_beyond_loopback(every) == []  # no serve-logs on 0.0.0.0:8793 or [::]:8794
        shown = json.loads(subprocess.run([DEEPSENT, "stack", "status", "--json"], env=stack_env, capture_output=True,
                                          text=True, timeout=120).stdout)["services"]
        assert shown["mlflow"]["listeners"] == [f"127.0.0.1:{cfg.ports['mlflow']}"]
        # a service that dies is started again by the supervisor
        os.killpg(json.loads(up.stdout)["services"]["mlflow"]["pid"], signal.SIGKILL)
        watched = subprocess.run([DEEPSENT, "stack", "watch", "--rounds", "1", "--json"], env=stack_env,
                                 capture_output=True, text=True, timeout=300)
        assert watched.returncode == 0, watched.stderr[-2000:]
        restarted = json.loads(watched.stdout)
        assert [r["services"] for r in restarted["restarted"]] == [["mlflow"]] and restarted["services"]["mlflow"]["healthy"]
        pids = [svc["pid"] for svc in restarted["services"].values()]
        mlflow_api = f"{cfg.url('mlflow')}/api/2.0/mlflow"
        assert request(f"{mlflow_api}/experiments/search?max_results=1")[0] == 401  # anonymous: refused
        code, _ = request(f"{mlflow_api}/registered-models/create", method="POST", body={"name": "anyone"})
        assert code == 401  # no unauthenticated write to the registry

        airflow, token = cfg.url("airflow") + "/api/v2", stack.airflow_token(cfg)
        dag = f"{airflow}/dags/deepsent_retrain"
        poll("the DAG to be parsed", lambda: request(dag, token)[0] == 200, timeout=180)
        code, refused = request(f"{dag}/dagRuns", token, "POST", {"logical_date": None, "conf": {"epochs": 0}})
        assert code == 400 and "epochs" in json.dumps(refused)  # a bad trigger never becomes a run
        assert request(f"{dag}/dagRuns", token)[1]["total_entries"] == 0
    finally:
        down = subprocess.run([DEEPSENT, "stack", "down", "--json"], env=stack_env, capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr[-2000:]
        assert all(stack.session_members(pid) == [] for pid in pids)
        assert not any(stack.port_in_use(cfg.host, port) for port in cfg.ports.values())


def test_stack_module_is_imported_from_the_repository() -> None:
    code = "from infra import stack; print(stack.__file__)"
    out = subprocess.run([DEEPSENT_PYTHON, "-c", code], cwd="/", capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == PROJECT_ROOT / "infra" / "stack.py"  # installed, importable from anywhere
