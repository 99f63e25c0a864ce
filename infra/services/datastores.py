"""PostgreSQL (Airflow's metadata DB, MLflow's backend store) and Redis (the Celery broker) of the celery stack.

Both are Debian packages, installed with apt when missing (``infra/apt-install.sh``), and run as the
stack's own processes under its folder, never as system services. PostgreSQL refuses to run as root:
when the stack runs as root, the server runs as the ``postgres`` user the Debian package creates.
"""
from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
from pathlib import Path

from infra.config import POSTGRES_USER, PROJECT_ROOT, StackConfig
from infra.processes import StackError
from infra.services.base import Service

APT_INSTALL = PROJECT_ROOT / "infra" / "apt-install.sh"
POSTGRES_OS_USER = "postgres"
DATABASES = ("airflow", "mlflow")


def apt_install(cfg: StackConfig, *packages: str) -> None:
    """Install Debian ``packages`` (output in ``logs/install.log``); one-line error when apt-get fails."""
    log = cfg.root / "logs" / "install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        done = subprocess.run(["bash", str(APT_INSTALL), *packages], stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise StackError(f"apt-get install {' '.join(packages)} failed (exit {done.returncode}): {last}; see {log}")


def postgres_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` (Debian's layout), else the folder of ``postgres`` on PATH."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/postgres")]
    if found:
        return max(found, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _postgres_run_as() -> str | None:
    return POSTGRES_OS_USER if os.geteuid() == 0 else None


def _first_unreachable(path: Path, user: str) -> Path | None:
    """The first folder on the way to ``path`` that ``user`` may not enter (None when all can be entered)."""
    entry = pwd.getpwnam(user)
    groups = {entry.pw_gid, *os.getgrouplist(user, entry.pw_gid)}
    for folder in [*reversed(path.parents), path]:
        st = folder.stat()
        if st.st_uid == entry.pw_uid:
            allowed = st.st_mode & stat.S_IXUSR
        elif st.st_gid in groups:
            allowed = st.st_mode & stat.S_IXGRP
        else:
            allowed = st.st_mode & stat.S_IXOTH
        if not allowed:
            return folder
    return None


def _prepare_postgres(cfg: StackConfig) -> None:
    """Install PostgreSQL when missing; initdb into ``<stack>/postgres/data`` once, password into ``pgpass`` (0600)."""
    if postgres_bin_dir() is None:
        apt_install(cfg, "postgresql")
    home, user = cfg.root / "postgres", _postgres_run_as()
    home.mkdir(parents=True, exist_ok=True)
    if user:
        try:
            blocked = _first_unreachable(home, user)
        except KeyError:
            raise StackError(f"PostgreSQL refuses to run as root and there is no '{user}' user to run it") from None
        if blocked:
            raise StackError(f"PostgreSQL runs as user '{user}' (it refuses root), which cannot enter {blocked} "
                             f"(mode {oct(blocked.stat().st_mode & 0o777)}); choose a DEEPSENT_STACK_DIR it can reach")
    for sub in ("data", "run"):
        (home / sub).mkdir(mode=0o700, exist_ok=True)
        if user:
            shutil.chown(home / sub, user, user)
    if (home / "data" / "PG_VERSION").exists():
        return
    password = secrets.token_urlsafe(24)
    pw_file = home / "run" / "initdb-password"
    fd = os.open(pw_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(password + "\n")
    if user:
        shutil.chown(pw_file, user, user)
    argv = [str(postgres_bin_dir() / "initdb"), "-D", str(home / "data"), "-U", POSTGRES_USER, "-E", "UTF8",
            "--auth=scram-sha-256", f"--pwfile={pw_file}", "--no-instructions"]
    kwargs = {"user": user, "group": user, "extra_groups": []} if user else {}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=home, **kwargs)
    finally:
        pw_file.unlink(missing_ok=True)
    if done.returncode != 0:
        shutil.rmtree(home / "data", ignore_errors=True)
        raise StackError(f"initdb failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    fd = os.open(cfg.pgpass_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{cfg.host}:*:*:{POSTGRES_USER}:{password}\n")  # any port: the port setting may change later


def _postgres_command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
    home = cfg.root / "postgres"
    return [str(postgres_bin_dir() / "postgres"), "-D", str(home / "data"), "-h", cfg.host,
            "-p", str(cfg.ports["postgres"]), "-k", str(home / "run")], {}


def _connect(cfg: StackConfig, database: str = "postgres"):  # noqa: ANN202 (psycopg is imported lazily)
    import psycopg

    return psycopg.connect(host=cfg.host, port=cfg.ports["postgres"], user=POSTGRES_USER, dbname=database,
                           passfile=str(cfg.pgpass_file), connect_timeout=3, autocommit=True)


def _postgres_healthy(cfg: StackConfig) -> bool:
    try:
        with _connect(cfg) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except Exception:  # noqa: BLE001 (psycopg.OperationalError, or no pgpass yet): not healthy
        return False


def _create_databases(cfg: StackConfig) -> None:
    """The ``airflow`` and ``mlflow`` databases, when missing."""
    with _connect(cfg) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for name in DATABASES:
            if name not in existing:
                conn.execute(f'CREATE DATABASE "{name}"')


def _postgres_url(cfg: StackConfig) -> str:
    return cfg.postgres_url("postgres")


def _prepare_redis(cfg: StackConfig) -> None:
    if shutil.which("redis-server") is None:
        apt_install(cfg, "redis-server")
    (cfg.root / "redis").mkdir(parents=True, exist_ok=True)


def _redis_command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
    # No snapshots: the broker's queue is transient; a restart of the stack starts it empty.
    return [shutil.which("redis-server") or "redis-server", "--bind", cfg.host, "--port", str(cfg.ports["redis"]),
            "--dir", str(cfg.root / "redis"), "--daemonize", "no", "--save", "", "--appendonly", "no"], {}


def _redis_healthy(cfg: StackConfig) -> bool:
    import redis

    try:
        return bool(redis.Redis(host=cfg.host, port=cfg.ports["redis"], socket_timeout=2).ping())
    except redis.RedisError:
        return False


POSTGRES = Service("postgres", "PostgreSQL", _postgres_command, _postgres_healthy, stage=0, url=_postgres_url,
                   ports=("postgres",), prepare=_prepare_postgres, ready=_create_databases,
                   stop_signal=signal.SIGINT,  # "fast" shutdown; SIGTERM waits for every client to leave
                   run_as=_postgres_run_as)
REDIS = Service("redis", "Redis (Celery broker)", _redis_command, _redis_healthy, stage=0,
                url=lambda cfg: cfg.redis_url, ports=("redis",), prepare=_prepare_redis)
