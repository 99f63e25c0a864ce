"""The local service stack on 127.0.0.1: an S3 endpoint (moto), the MLflow tracking server, Airflow.

Each service runs in its own session and process group (``setsid``), with a pid file and a log
under the stack folder (``DEEPSENT_STACK_DIR``, default ``.deepsent/stack``). ``down`` sends SIGTERM
to every process of each service's session and SIGKILL after a grace period, so nothing is left
behind. Airflow's tasks see the stack through environment variables: the store is a bucket on the
local S3 endpoint and MLflow is the tracking server (artifacts proxied to the same bucket).

Linux only: process groups are found through ``/proc``.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

PROJECT_ROOT = Path(__file__).resolve().parents[1]
AIRFLOW_ENV_FILE = Path(__file__).with_name("airflow.env")
SERVICES = ("s3", "mlflow", "airflow")
LABELS = {"s3": "S3 endpoint (moto)", "mlflow": "MLflow tracking server", "airflow": "Airflow"}
PORT_ENV = {"s3": "DEEPSENT_S3_PORT", "mlflow": "DEEPSENT_MLFLOW_PORT", "airflow": "DEEPSENT_AIRFLOW_PORT"}
DEFAULT_PORTS = {"s3": 9000, "mlflow": 5000, "airflow": 8080}
#: Dummy keys for the local endpoint only (moto accepts any); real deployments use their own.
LOCAL_S3_KEYS = {"AWS_ACCESS_KEY_ID": "deepsent-local", "AWS_SECRET_ACCESS_KEY": "deepsent-local-secret"}


class StackError(RuntimeError):
    """A service could not start or stop; the message says which and why."""


@dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its files and which ports it binds (all on 127.0.0.1)."""

    root: Path
    ports: dict[str, int]
    data_dir: Path
    bucket: str = "deepsent"
    host: str = "127.0.0.1"
    base_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "StackConfig":
        """Settings from ``DEEPSENT_STACK_DIR``, ``DEEPSENT_{AIRFLOW,MLFLOW,S3}_PORT``, ``DEEPSENT_DATA_DIR``."""
        env = dict(os.environ if env is None else env)
        root = Path(env.get("DEEPSENT_STACK_DIR") or ".deepsent/stack").expanduser().resolve()
        ports = {name: int(env.get(PORT_ENV[name]) or DEFAULT_PORTS[name]) for name in SERVICES}
        data_dir = Path(env.get("DEEPSENT_DATA_DIR") or PROJECT_ROOT.parent / "shared" / "data").resolve()
        bucket = env.get("DEEPSENT_STACK_BUCKET") or "deepsent"
        return cls(root=root, ports=ports, data_dir=data_dir, bucket=bucket, base_env=env)

    def url(self, name: str) -> str:
        """Base URL of a service."""
        return f"http://{self.host}:{self.ports[name]}"

    @property
    def airflow_home(self) -> Path:
        """AIRFLOW_HOME of the stack (metadata DB, task logs, password file)."""
        return self.root / "airflow"

    @property
    def password_file(self) -> Path:
        """The simple auth manager's password file (mode 0600; never printed)."""
        return self.airflow_home / "passwords.json"

    @property
    def store(self) -> str:
        """The store root the stack's Airflow tasks use."""
        return f"s3://{self.bucket}/store"

    def client_env(self) -> dict[str, str]:
        """Variables that point the CLI, tests and Airflow tasks at this stack."""
        return {
            "DEEPSENT_STORE": self.store,
            "DEEPSENT_DATA_DIR": str(self.data_dir),
            "AWS_ENDPOINT_URL": self.url("s3"),
            "MLFLOW_S3_ENDPOINT_URL": self.url("s3"),
            "AWS_DEFAULT_REGION": "us-east-1",
            "MLFLOW_TRACKING_URI": self.url("mlflow"),
            **LOCAL_S3_KEYS,
        }


def _read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of ``path`` (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _command(cfg: StackConfig, name: str) -> tuple[list[str], dict[str, str]]:
    """The argv and extra environment of service ``name``."""
    bin_dir = Path(sys.executable).parent
    port = str(cfg.ports[name])
    if name == "s3":
        return [str(bin_dir / "moto_server"), "-H", cfg.host, "-p", port], {}
    if name == "mlflow":
        db = cfg.root / "mlflow" / "mlflow.db"
        argv = [str(bin_dir / "mlflow"), "server", "--host", cfg.host, "--port", port, "--workers", "1",
                "--backend-store-uri", f"sqlite:///{db}",
                "--artifacts-destination", f"s3://{cfg.bucket}/mlflow-artifacts"]
        # The GenAI job runner starts ~7 extra processes (~1.7 GB) that this project never uses.
        return argv, {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env = _read_env_file(AIRFLOW_ENV_FILE)
    env.update({
        "AIRFLOW_HOME": str(cfg.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__API__HOST": cfg.host,
        "AIRFLOW__API__PORT": port,
        "AIRFLOW__API__BASE_URL": cfg.url("airflow"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(cfg.password_file),
        "DEEPSENT_DASK_WORKERS": cfg.base_env.get("DEEPSENT_DASK_WORKERS", "1"),
    })
    return [str(bin_dir / "airflow"), "standalone"], env


def _health_url(cfg: StackConfig, name: str) -> str:
    paths = {"s3": "/moto-api/", "mlflow": "/health", "airflow": "/api/v2/monitor/health"}
    return cfg.url(name) + paths[name]


def _get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    """Status and body of a GET (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError):
        return 0, b""


def healthy(cfg: StackConfig, name: str) -> bool:
    """True when the service answers its health check (Airflow: every component reports healthy)."""
    code, body = _get(_health_url(cfg, name))
    if code != 200:
        return False
    if name != "airflow":
        return True
    report = json.loads(body)
    parts = ("metadatabase", "scheduler", "dag_processor", "triggerer")
    return all((report.get(p) or {}).get("status") == "healthy" for p in parts)


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, session id) of a process, None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields_after_name = raw.rsplit(")", 1)[1].split()
    return fields_after_name[0], int(fields_after_name[2]), int(fields_after_name[3])


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) pids whose session id is ``sid``: everything a service started."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat and stat[2] == sid and stat[0] != "Z":
                members.append(int(entry.name))
    return sorted(members)


def _pid_file(cfg: StackConfig, name: str) -> Path:
    return cfg.root / "pids" / f"{name}.pid"


def _log_file(cfg: StackConfig, name: str) -> Path:
    return cfg.root / "logs" / f"{name}.log"


def _recorded_pid(cfg: StackConfig, name: str) -> int | None:
    """The pid in the service's pid file; a missing, garbled or <= 1 one is removed and gives None."""
    pid_file = _pid_file(cfg, name)
    text = pid_file.read_text().strip() if pid_file.exists() else ""
    if text.isdigit() and int(text) > 1:
        return int(text)
    pid_file.unlink(missing_ok=True)
    return None


def _running_pid(cfg: StackConfig, name: str) -> int | None:
    """The leader pid of a running service, None when stopped (a stale pid file is removed)."""
    pid = _recorded_pid(cfg, name)
    if pid is not None and session_members(pid):
        return pid
    _pid_file(cfg, name).unlink(missing_ok=True)
    return None


def _write_password_file(cfg: StackConfig) -> None:
    """Create the admin password once (0600), so Airflow never prints a generated one to its log."""
    if cfg.password_file.exists():
        return
    cfg.password_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(cfg.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"admin": secrets.token_urlsafe(18)}, fh)


def _write_client_env(cfg: StackConfig) -> None:
    """``<root>/client.env`` (0600): ``source`` it to point the deepsent CLI at the stack."""
    cfg.root.mkdir(parents=True, exist_ok=True)
    path = cfg.root / "client.env"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.writelines(f"export {k}={v}\n" for k, v in sorted(cfg.client_env().items()))


def _ensure_bucket(cfg: StackConfig) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=cfg.url("s3"), region_name="us-east-1",
                          aws_access_key_id=LOCAL_S3_KEYS["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=LOCAL_S3_KEYS["AWS_SECRET_ACCESS_KEY"])
    if cfg.bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=cfg.bucket)


def _start(cfg: StackConfig, name: str, timeout: float) -> int:
    """Start one service in a new session, wait for its health check; returns its pid."""
    argv, extra_env = _command(cfg, name)
    env = {**cfg.base_env, **cfg.client_env(), **extra_env}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log_path = _log_file(cfg, name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _pid_file(cfg, name).parent.mkdir(parents=True, exist_ok=True)
    (cfg.root / "mlflow").mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=str(cfg.root), start_new_session=True)
    _pid_file(cfg, name).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _stop(cfg, name, grace=5.0)
            raise StackError(f"{LABELS[name]} exited with code {proc.returncode} at start-up; see {log_path}")
        if healthy(cfg, name):
            return proc.pid
        time.sleep(1.0)
    _stop(cfg, name, grace=10.0)
    raise StackError(f"{LABELS[name]} did not become healthy within {timeout:.0f} s; see {log_path}")


def _stop(cfg: StackConfig, name: str, grace: float = 30.0) -> int:
    """SIGTERM every process group of the service's session, SIGKILL after ``grace``; returns pids stopped."""
    sid = _recorded_pid(cfg, name)
    if sid is None:
        return 0
    members = session_members(sid)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pgid in _process_groups(session_members(sid)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while session_members(sid) and time.monotonic() < deadline:
            _reap(sid)
            time.sleep(0.2)
        if not session_members(sid):
            break
    _reap(sid)
    left = session_members(sid)
    if left:
        raise StackError(f"{LABELS[name]}: processes {left} survived SIGKILL")
    _pid_file(cfg, name).unlink(missing_ok=True)
    return len(members)


def _process_groups(pids: list[int]) -> set[int]:
    """The process group ids of ``pids`` (those still alive)."""
    return {stat[1] for stat in map(_proc_stat, pids) if stat is not None}


def _reap(pid: int) -> None:
    """Collect the exit status of a leader we started ourselves (else it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def up(cfg: StackConfig, timeout: float = 300.0) -> dict[str, Any]:
    """Start the services that are not running yet (S3, then MLflow, then Airflow)."""
    to_start = [name for name in SERVICES if _running_pid(cfg, name) is None]
    taken = [name for name in to_start if port_in_use(cfg.host, cfg.ports[name])]
    if taken:
        lines = [f"port {cfg.ports[n]} for {LABELS[n]} on {cfg.host} is already taken by another process; "
                 f"stop that process or choose a free port with {PORT_ENV[n]}=PORT" for n in taken]
        raise StackError("; ".join(lines))
    _write_password_file(cfg)
    _write_client_env(cfg)
    started = []
    for name in SERVICES:
        if name in to_start:
            _start(cfg, name, timeout)
            started.append(name)
        if name == "s3":
            _ensure_bucket(cfg)
    return {**status(cfg), "started": started}


def down(cfg: StackConfig, grace: float = 30.0) -> dict[str, Any]:
    """Stop every service (Airflow first), whole process groups: processes stopped and seconds taken."""
    stopped, seconds = {}, {}
    for name in reversed(SERVICES):
        started = time.monotonic()
        stopped[name] = _stop(cfg, name, grace)
        seconds[name] = round(time.monotonic() - started, 1)
    return {"stopped": stopped, "seconds": seconds, "root": str(cfg.root)}


def status(cfg: StackConfig) -> dict[str, Any]:
    """Per service: pid, running, healthy, URL and log file."""
    services = {}
    for name in SERVICES:
        pid = _running_pid(cfg, name)
        services[name] = {
            "label": LABELS[name],
            "url": cfg.url(name),
            "pid": pid,
            "running": pid is not None,
            "healthy": pid is not None and healthy(cfg, name),
            "log": str(_log_file(cfg, name)),
        }
    return {"root": str(cfg.root), "services": services, "store": cfg.store,
            "password_file": str(cfg.password_file)}


def airflow_token(cfg: StackConfig) -> str:
    """A JWT for Airflow's REST API (simple auth manager: POST /auth/token with the admin password)."""
    password = json.loads(cfg.password_file.read_text())["admin"]
    body = json.dumps({"username": "admin", "password": password}).encode()
    req = urllib.request.Request(cfg.url("airflow") + "/auth/token", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["access_token"]
