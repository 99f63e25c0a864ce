"""The light stack's services: the S3 endpoint (moto, signed requests only), the MLflow server, and Airflow's settings and health
(its components are :mod:`infra.services.airflow`).

The S3 endpoint and MLflow are shared with the celery stack; there MLflow's backend store is PostgreSQL.
"""
from __future__ import annotations

import json
import os
import secrets
import sys

from infra.config import MLFLOW_USER, PROJECT_ROOT, StackConfig
from infra.processes import StackError, http_get
from infra.s3_server import KEY_ID_ENV, SECRET_ENV
from infra.services.base import BIN_DIR, Service, read_env_file

AIRFLOW_ENV_FILE = PROJECT_ROOT / "infra" / "airflow.env"


def _http_ok(cfg: StackConfig, key: str, path: str) -> bool:
    return http_get(cfg.url(key) + path)[0] == 200


def _s3_command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
    """moto's server answering only requests signed with the stack's key (``infra.s3_server``)."""
    keys = cfg.s3_keys()
    return ([sys.executable, "-m", "infra.s3_server", "--host", cfg.host, "--port", str(cfg.ports["s3"])],
            {KEY_ID_ENV: keys["AWS_ACCESS_KEY_ID"], SECRET_ENV: keys["AWS_SECRET_ACCESS_KEY"]})


def ensure_bucket(cfg: StackConfig) -> None:
    """Create the stack's bucket on the S3 endpoint when missing (the endpoint keeps objects in memory)."""
    import boto3

    keys = cfg.s3_keys()
    client = boto3.client("s3", endpoint_url=cfg.url("s3"), region_name="us-east-1",
                          aws_access_key_id=keys["AWS_ACCESS_KEY_ID"], aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"])
    if cfg.bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=cfg.bucket)


def _mlflow_command(cfg: StackConfig) -> tuple[list[str], dict[str, str]]:
    # The GenAI job runner starts ~7 extra processes (~1.7 GB) that this project never uses.
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    if cfg.executor == "celery":
        backend = cfg.postgres_url("mlflow")
        env["PGPASSFILE"] = str(cfg.pgpass_file)
    else:
        backend = f"sqlite:///{cfg.root / 'mlflow' / 'mlflow.db'}"
        (cfg.root / "mlflow").mkdir(parents=True, exist_ok=True)
    env.update(_mlflow_auth(cfg))
    argv = [str(BIN_DIR / "mlflow"), "server", "--host", cfg.host, "--port", str(cfg.ports["mlflow"]),
            "--workers", "1", "--backend-store-uri", backend, "--app-name", "basic-auth",
            "--artifacts-destination", f"s3://{cfg.bucket}/mlflow-artifacts"]
    return argv, env


def _mlflow_auth(cfg: StackConfig) -> dict[str, str]:
    """MLflow's basic-auth app: only the stack's admin user (``client_env``) may read or write; anonymous
    requests get 401. Its user store is a SQLite file beside the config; secrets come from 0600 files."""
    folder = cfg.root / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "basic_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = NO_PERMISSIONS\n"
                      f"database_uri = sqlite:///{folder / 'basic_auth.db'}\nadmin_username = {MLFLOW_USER}\n"
                      "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    return {"MLFLOW_AUTH_CONFIG_PATH": str(config), "MLFLOW_AUTH_ADMIN_PASSWORD": cfg.mlflow_secret("admin-password"),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": cfg.mlflow_secret("flask-secret")}


def airflow_env(cfg: StackConfig) -> dict[str, str]:
    """Airflow settings shared by every Airflow process of the stack (static ones from ``airflow.env``)."""
    env = read_env_file(AIRFLOW_ENV_FILE)
    env.update({
        "AIRFLOW_HOME": str(cfg.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__API__HOST": cfg.host,
        "AIRFLOW__API__PORT": str(cfg.ports["airflow"]),
        "AIRFLOW__API__BASE_URL": cfg.url("airflow"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(cfg.password_file),
        "DEEPSENT_DASK_WORKERS": cfg.base_env.get("DEEPSENT_DASK_WORKERS", "1"),
    })
    return env


def write_password_file(cfg: StackConfig) -> None:
    """Create the admin password once (0600), so Airflow never prints a generated one to its log."""
    if cfg.password_file.exists():
        return
    cfg.password_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(cfg.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"admin": secrets.token_urlsafe(18)}, fh)


def airflow_health(cfg: StackConfig) -> dict[str, str]:
    """Status of each part in Airflow's ``/api/v2/monitor/health`` (empty when the API does not answer)."""
    code, body = http_get(cfg.url("airflow") + "/api/v2/monitor/health")
    if code != 200:
        return {}
    report = json.loads(body)
    return {part: (value or {}).get("status", "") for part, value in report.items() if isinstance(value, dict)}


def warm_execution_api(cfg: StackConfig) -> None:
    """Make the API server build its Execution API app (where workers start and finish tasks) during ``up``.

    It is built on the first request: 37 s at load 13 on 2 cores, during which the whole API server
    answered nothing, and a first task's worker gave up (5 s timeout, 5 tries)."""
    if http_get(cfg.url("airflow") + "/execution/health", timeout=180.0)[0] != 200:
        raise StackError(f"Airflow's Execution API at {cfg.url('airflow')}/execution/ did not answer within 180 s")


S3 = Service("s3", "S3 endpoint (moto)", _s3_command, lambda cfg: _http_ok(cfg, "s3", "/moto-api/"),
             stage=0, url=lambda cfg: cfg.url("s3"), ports=("s3",), ready=ensure_bucket)
MLFLOW = Service("mlflow", "MLflow tracking server", _mlflow_command, lambda cfg: _http_ok(cfg, "mlflow", "/health"),
                 stage=1, url=lambda cfg: cfg.url("mlflow"), ports=("mlflow",))
