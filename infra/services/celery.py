"""The celery stack's Airflow (api-server, scheduler, dag-processor, triggerer as separate processes, two
Celery workers: queue ``default`` and queue ``gpu`` with concurrency 1) and its Dask cluster (a scheduler
and two single-threaded workers, each its own process).

Every Airflow process reads its metadata DB from PostgreSQL (password from ``PGPASSFILE``, never in a
URL), Celery's broker is Redis and its result backend the same database. Log serving is off
(``--skip-serve-logs``): every process shares the stack's log folder, so no log-server port is needed.
"""
from __future__ import annotations

import json
import socket

from infra.config import PROJECT_ROOT, StackConfig
from infra.processes import http_get
from infra.services.airflow import airflow_components
from infra.services.base import BIN_DIR, Service, read_env_file
from infra.services.light import airflow_env

CELERY_ENV_FILE = PROJECT_ROOT / "infra" / "airflow-celery.env"
#: Celery queue -> worker concurrency. ``train`` goes to ``gpu`` (``DEEPSENT_TRAIN_QUEUE`` in airflow-celery.env).
CELERY_QUEUES = {"default": 2, "gpu": 1}
DASK_WORKERS = ("dask-worker-1", "dask-worker-2")
AIRFLOW = str(BIN_DIR / "airflow")
DASK = str(BIN_DIR / "dask")


def celery_airflow_env(cfg: StackConfig) -> dict[str, str]:
    """Environment of every Airflow process of the celery stack."""
    env = {**airflow_env(cfg), **read_env_file(CELERY_ENV_FILE)}
    env.update({
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": cfg.postgres_url("airflow"),
        "AIRFLOW__CELERY__BROKER_URL": cfg.redis_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": cfg.postgres_url("airflow", driver="db+postgresql"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": cfg.url("airflow") + "/execution/",
        "PGPASSFILE": str(cfg.pgpass_file),
    })
    return env


def celery_node(queue: str) -> str:
    """The Celery node name of the worker of ``queue`` (also its task instances' ``hostname``)."""
    return f"{queue}@{socket.gethostname()}"


def _celery_worker_command(cfg: StackConfig, queue: str) -> tuple[list[str], dict[str, str]]:
    env = {**celery_airflow_env(cfg), "DEEPSENT_WORKER_NAME": celery_node(queue),
           "AIRFLOW__CORE__HOSTNAME_CALLABLE": "infra.worker_hostname.worker_hostname"}
    argv = [AIRFLOW, "celery", "worker", "--queues", queue, "--concurrency", str(CELERY_QUEUES[queue]),
            "--celery-hostname", celery_node(queue), "--skip-serve-logs",
            "--pid", str(cfg.airflow_home / f"celery-{queue}.pid")]
    return argv, env


def _celery_worker_healthy(cfg: StackConfig, queue: str) -> bool:
    """The worker answers a ping through the broker."""
    from celery import Celery

    app = Celery(broker=cfg.redis_url)
    try:
        replies = app.control.ping(destination=[celery_node(queue)], timeout=1.0)
    except Exception:  # noqa: BLE001 (kombu raises many kinds while Redis is down): not healthy
        return False
    finally:
        app.close()
    return any(celery_node(queue) in reply for reply in replies)


def _celery_worker(queue: str) -> Service:
    return Service(f"celery-{queue}", f"Celery worker, queue {queue}", lambda cfg: _celery_worker_command(cfg, queue),
                   lambda cfg: _celery_worker_healthy(cfg, queue), stage=3, url=lambda cfg: cfg.redis_url)


def _dask_env() -> dict[str, str]:
    """The monitoring a small machine cannot spare, turned down as for local clusters (pipeline.runtime.dask_cluster)."""
    from pipeline.runtime.dask_cluster import LOCAL_OVERRIDES, dask_env_var

    return {dask_env_var(key): str(value) for key, value in LOCAL_OVERRIDES.items()}


def _dask_scheduler_command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
    argv = [DASK, "scheduler", "--host", cfg.host, "--port", str(cfg.ports["dask"]), "--no-dashboard",
            "--dashboard-address", f"{cfg.host}:{cfg.ports['dask_http']}"]
    return argv, _dask_env()


def dask_worker_names(cfg: StackConfig) -> set[str]:
    """Names of the workers the scheduler knows (its ``/json/identity.json``)."""
    code, body = http_get(f"{cfg.url('dask_http')}/json/identity.json")
    return {str(w.get("name")) for w in json.loads(body).get("workers", {}).values()} if code == 200 else set()


def _dask_worker(name: str) -> Service:
    def command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
        argv = [DASK, "worker", cfg.dask_address, "--name", name, "--nthreads", "1", "--no-nanny",
                "--host", cfg.host, "--no-dashboard", "--dashboard-address", f"{cfg.host}:0",
                "--local-directory", str(cfg.root / "dask")]
        return argv, _dask_env()

    return Service(name, f"Dask worker {name[-1]}", command, lambda cfg: name in dask_worker_names(cfg), stage=1,
                   url=lambda cfg: cfg.dask_address)


DASK_SCHEDULER = Service("dask-scheduler", "Dask scheduler", _dask_scheduler_command,
                         lambda cfg: http_get(f"{cfg.url('dask_http')}/health")[0] == 200, stage=0,
                         url=lambda cfg: cfg.dask_address, ports=("dask", "dask_http"))
CELERY_AIRFLOW = (
    *airflow_components(celery_airflow_env),
    *(_celery_worker(queue) for queue in CELERY_QUEUES),
)
DASK_CLUSTER = (DASK_SCHEDULER, *(_dask_worker(name) for name in DASK_WORKERS))
