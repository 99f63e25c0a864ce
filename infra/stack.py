"""The local service stack on 127.0.0.1: ``up``, ``down`` and ``status`` (``deepsent stack``).

The light stack (executor ``local``): an S3 endpoint (moto, signed requests only), the MLflow tracking server, Airflow's
api-server, scheduler, dag-processor and triggerer (LocalExecutor on SQLite, no log server: nothing
listens beyond 127.0.0.1). The celery stack adds PostgreSQL, Redis, the same Airflow components with
two Celery workers (queues ``default`` and ``gpu``) and a Dask cluster (``infra/services/``).

Each service runs in its own session and process group (``setsid``), with a pid file and a log under
the stack folder (``DEEPSENT_STACK_DIR``, default ``.deepsent/stack``). ``down`` sends each service's stop
signal to every process of its session and SIGKILL after a grace period, so nothing is left behind.
Airflow's tasks see the stack through environment variables (``StackConfig.client_env``).

Linux only: process groups are found through ``/proc``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from infra.config import PORT_ENV, PROJECT_ROOT, StackConfig  # noqa: F401 (re-exported)
from infra.processes import (StackError, listening_addresses, port_in_use, proc_stat, read_pid,  # noqa: F401
                             service_processes, session_members, start_session, stop_session)
from infra.services import ALL, BY_EXECUTOR, Service

_proc_stat = proc_stat  # the name older callers use
SERVICES = tuple(s.name for s in BY_EXECUTOR["local"])
CELERY_SERVICES = tuple(s.name for s in BY_EXECUTOR["celery"])
LABELS = {name: service.label for name, service in ALL.items()}


def _pid_file(cfg: StackConfig, name: str) -> Path:
    return cfg.root / "pids" / f"{name}.pid"


def _log_file(cfg: StackConfig, name: str) -> Path:
    return cfg.root / "logs" / f"{name}.log"


def _running_pid(cfg: StackConfig, name: str) -> int | None:
    """The leader pid of a running service, None when stopped (a stale pid file is removed)."""
    pid = read_pid(_pid_file(cfg, name))
    if pid is not None and session_members(pid):
        return pid
    _pid_file(cfg, name).unlink(missing_ok=True)
    return None


def healthy(cfg: StackConfig, name: str) -> bool:
    """True when the service answers its health check."""
    return ALL[name].healthy(cfg)


def _write_client_env(cfg: StackConfig) -> None:
    """``<root>/client.env`` (0600): ``source`` it to point the deepsent CLI at the stack."""
    cfg.root.mkdir(parents=True, exist_ok=True)
    path = cfg.root / "client.env"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.writelines(f"export {k}={v}\n" for k, v in sorted(cfg.client_env().items()))


def _launch(cfg: StackConfig, service: Service) -> Any:
    """Start one service in a new session (its log appended to, its pid recorded)."""
    argv, extra_env = service.command(cfg)
    env = {**cfg.base_env, **cfg.client_env(), **extra_env}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # Every process imports this checkout's code (Airflow tasks, Dask workers), whatever is installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    return start_session(argv, env, _log_file(cfg, service.name), _pid_file(cfg, service.name), cfg.root,
                         user=service.run_as())


def _wait_healthy(cfg: StackConfig, launched: dict[str, Any], timeout: float) -> None:
    """Wait until every launched service is healthy; a StackError names one that exits or times out."""
    deadline, waiting = time.monotonic() + timeout, dict(launched)
    while waiting:
        for name, proc in list(waiting.items()):
            if proc.poll() is not None:
                raise StackError(f"{LABELS[name]} exited with code {proc.returncode} at start-up; "
                                 f"see {_log_file(cfg, name)}")
            if ALL[name].healthy(cfg):
                del waiting[name]
        if waiting and time.monotonic() > deadline:
            names = ", ".join(LABELS[n] for n in waiting)
            raise StackError(f"{names} did not become healthy within {timeout:.0f} s; see {cfg.root / 'logs'}")
        if waiting:
            time.sleep(1.0)


def _stop(cfg: StackConfig, name: str, grace: float = 30.0) -> int:
    """Stop one service's whole session; returns the number of processes stopped."""
    sid = read_pid(_pid_file(cfg, name))
    if sid is None:
        return 0
    stopped = stop_session(sid, LABELS[name], grace, ALL[name].stop_signal)
    _pid_file(cfg, name).unlink(missing_ok=True)
    return stopped


def _check_executor(cfg: StackConfig) -> None:
    """Refuse to start one kind of stack over a running stack of the other kind."""
    other = [n for n in ALL if n not in {s.name for s in BY_EXECUTOR[cfg.executor]} and _running_pid(cfg, n)]
    if other:
        raise StackError(f"a stack with other services ({', '.join(other)}) is running in {cfg.root}; "
                         "run deepsent stack down first")


def up(cfg: StackConfig, timeout: float = 300.0) -> dict[str, Any]:
    """Start the services that are not running yet, stage by stage, each stage waiting for its health checks."""
    _check_executor(cfg)
    services = BY_EXECUTOR[cfg.executor]
    to_start = [s for s in services if _running_pid(cfg, s.name) is None]
    taken = [key for s in to_start for key in s.ports if port_in_use(cfg.host, cfg.ports[key])]
    if taken:
        lines = [f"port {cfg.ports[key]} for {_port_owner(services, key)} on {cfg.host} is already taken by another "
                 f"process; stop that process or choose a free port with {PORT_ENV[key]}=PORT" for key in taken]
        raise StackError("; ".join(lines))
    _write_client_env(cfg)
    (cfg.root / "executor").write_text(cfg.executor + "\n")
    launched: dict[str, Any] = {}
    try:
        for stage in sorted({s.stage for s in services}):
            batch = [s for s in to_start if s.stage == stage]
            for service in batch:
                if service.prepare:
                    service.prepare(cfg)
            stage_launched = {s.name: _launch(cfg, s) for s in batch}
            launched.update(stage_launched)
            _wait_healthy(cfg, stage_launched, timeout)
            for service in services:
                if service.stage == stage and service.ready:
                    service.ready(cfg)
    except StackError:
        for name in reversed(list(launched)):  # a failed start leaves no process behind
            _stop(cfg, name, grace=10.0)
        if not any(_running_pid(cfg, name) for name in ALL):
            (cfg.root / "executor").unlink(missing_ok=True)
        raise
    return {**status(cfg), "started": list(launched)}


def watch(cfg: StackConfig, every: float = 30.0, rounds: int | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """A supervisor: every ``every`` seconds, start again each service that died (``up``), for ``rounds`` rounds
    (None: until stopped); the restarts it made."""
    restarted: list[dict[str, Any]] = []
    done = 0
    while rounds is None or done < rounds:
        started = up(cfg, timeout)["started"]
        if started:
            restarted.append({"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "services": started})
            print(f"deepsent stack watch: restarted {', '.join(started)}", file=sys.stderr, flush=True)
        done += 1
        if rounds is None or done < rounds:
            time.sleep(every)
    return {**status(cfg), "restarted": restarted}


def _port_owner(services: tuple[Service, ...], key: str) -> str:
    return next(s.label for s in services if key in s.ports)


def down(cfg: StackConfig, grace: float = 30.0) -> dict[str, Any]:
    """Stop every service (in reverse start order), whole process groups: processes stopped and seconds taken."""
    names = [s.name for s in BY_EXECUTOR[cfg.executor]]
    names += [n for n in ALL if n not in names and _pid_file(cfg, n).exists()]
    stopped, seconds = {}, {}
    for name in reversed(names):
        started = time.monotonic()
        stopped[name] = _stop(cfg, name, grace)
        seconds[name] = round(time.monotonic() - started, 1)
    (cfg.root / "executor").unlink(missing_ok=True)
    return {"stopped": stopped, "seconds": seconds, "root": str(cfg.root)}


def status(cfg: StackConfig) -> dict[str, Any]:
    """Per service: pid, running, healthy, URL and log file."""
    services = {}
    for service in BY_EXECUTOR[cfg.executor]:
        pid = _running_pid(cfg, service.name)
        services[service.name] = {
            "label": service.label,
            "url": service.url(cfg),
            "pid": pid,
            "running": pid is not None,
            "healthy": pid is not None and service.healthy(cfg),
            "listeners": listening_addresses(service_processes(pid)) if pid is not None else [],
            "log": str(_log_file(cfg, service.name)),
        }
    return {"root": str(cfg.root), "executor": cfg.executor, "services": services, "store": cfg.store,
            "password_file": str(cfg.password_file)}


def airflow_token(cfg: StackConfig) -> str:
    """A JWT for Airflow's REST API (simple auth manager: POST /auth/token with the admin password)."""
    password = json.loads(cfg.password_file.read_text())["admin"]
    body = json.dumps({"username": "admin", "password": password}).encode()
    req = urllib.request.Request(cfg.url("airflow") + "/auth/token", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["access_token"]
