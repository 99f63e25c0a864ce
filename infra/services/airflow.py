"""Airflow's components as separate services, for both stacks: api-server, scheduler, dag-processor, triggerer.

Not ``airflow standalone``: its scheduler and triggerer start Airflow's worker log server
(``serve-logs``, ports 8793/8794), which binds every interface (``host=""`` in
``airflow.utils.serve_logs.core``, no setting changes it). Every component here runs with
``--skip-serve-logs``: the API server reads task logs from the shared local log folder, and nothing
listens beyond 127.0.0.1.
"""
from __future__ import annotations

import subprocess
from typing import Callable

from infra.config import StackConfig
from infra.processes import StackError
from infra.services.base import BIN_DIR, Service
from infra.services.light import airflow_health, warm_execution_api, write_password_file

AIRFLOW = str(BIN_DIR / "airflow")
EnvOf = Callable[[StackConfig], dict[str, str]]


def _migrate(env_of: EnvOf) -> Callable[[StackConfig], None]:
    def migrate(cfg: StackConfig) -> None:
        """The admin password file, then ``airflow db migrate`` (idempotent; log: ``airflow-db-migrate.log``)."""
        write_password_file(cfg)
        log = cfg.root / "logs" / "airflow-db-migrate.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**cfg.base_env, **cfg.client_env(), **env_of(cfg)}
        with open(log, "ab") as out:
            done = subprocess.run([AIRFLOW, "db", "migrate"], env=env, cwd=cfg.root, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise StackError(f"airflow db migrate failed (exit {done.returncode}); see {log}")
    return migrate


def _component(name: str, part: str, argv: list[str], env_of: EnvOf) -> Service:
    """An Airflow component healthy when the API's health report says so."""
    return Service(f"airflow-{name}", f"Airflow {name}", lambda cfg: ([AIRFLOW, *argv], env_of(cfg)),
                   lambda cfg: airflow_health(cfg).get(part) == "healthy", stage=3, url=lambda cfg: cfg.url("airflow"))


def airflow_components(env_of: EnvOf) -> tuple[Service, ...]:
    """The api-server (which migrates the metadata DB first), scheduler, dag-processor and triggerer under ``env_of``."""
    api_server = Service(
        "airflow-api-server", "Airflow api-server", lambda cfg: ([AIRFLOW, "api-server"], env_of(cfg)),
        lambda cfg: airflow_health(cfg).get("metadatabase") == "healthy", stage=2, url=lambda cfg: cfg.url("airflow"),
        ports=("airflow",), prepare=_migrate(env_of), ready=warm_execution_api)
    return (api_server,
            _component("scheduler", "scheduler", ["scheduler", "--skip-serve-logs"], env_of),
            _component("dag-processor", "dag_processor", ["dag-processor"], env_of),
            _component("triggerer", "triggerer", ["triggerer", "--skip-serve-logs"], env_of))
