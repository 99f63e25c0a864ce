"""Settings of the local stack: its folder, executor, ports (all on 127.0.0.1) and what its clients see."""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from infra.processes import StackError
from pipeline.core import validators

PROJECT_ROOT = Path(__file__).resolve().parents[1]
EXECUTORS = ("local", "celery")
#: Port settings: key -> (environment variable, default).
PORTS = {
    "s3": ("DEEPSENT_S3_PORT", 9000),
    "mlflow": ("DEEPSENT_MLFLOW_PORT", 5000),
    "airflow": ("DEEPSENT_AIRFLOW_PORT", 8080),
    "postgres": ("DEEPSENT_POSTGRES_PORT", 5432),
    "redis": ("DEEPSENT_REDIS_PORT", 6379),
    "dask": ("DEEPSENT_DASK_PORT", 8786),
    "dask_http": ("DEEPSENT_DASK_HTTP_PORT", 8787),
}
PORT_ENV = {key: var for key, (var, _) in PORTS.items()}
#: The access key id of the stack's S3 endpoint; its secret lives only in ``<root>/s3/secret-key`` (0600).
S3_KEY_ID = "deepsent-stack"
#: The PostgreSQL role of the stack; its password lives only in ``pgpass`` (0600), never in a URL or argv.
POSTGRES_USER = "deepsent"
#: The MLflow server's admin user (basic auth); its password lives only in ``<root>/mlflow/admin-password`` (0600).
MLFLOW_USER = "deepsent"


@dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its files, which executor it runs and which ports it binds (all on 127.0.0.1)."""

    root: Path
    ports: dict[str, int]
    data_dir: Path
    executor: str = "local"
    bucket: str = "deepsent"
    host: str = "127.0.0.1"
    base_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, executor: str | None = None) -> "StackConfig":
        """Settings from ``DEEPSENT_STACK_DIR``, ``DEEPSENT_*_PORT``, ``DEEPSENT_DATA_DIR``; executor: given,
        else the running stack's (recorded by ``up``), else ``DEEPSENT_STACK_EXECUTOR``, else ``local``."""
        env = dict(os.environ if env is None else env)
        root = Path(env.get("DEEPSENT_STACK_DIR") or ".deepsent/stack").expanduser().resolve()
        ports = {key: validators.checked(var, validators.port, env.get(var) or default)
                 for key, (var, default) in PORTS.items()}
        data_dir = Path(env.get("DEEPSENT_DATA_DIR") or PROJECT_ROOT.parent / "shared" / "data").resolve()
        bucket = env.get("DEEPSENT_STACK_BUCKET") or "deepsent"
        recorded = root / "executor"
        executor = (executor or (recorded.read_text().strip() if recorded.exists() else "")
                    or env.get("DEEPSENT_STACK_EXECUTOR") or "local")
        if executor not in EXECUTORS:
            raise StackError(f"DEEPSENT_STACK_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {executor!r}")
        return cls(root=root, ports=ports, data_dir=data_dir, executor=executor, bucket=bucket, base_env=env)

    def url(self, key: str) -> str:
        """Base HTTP URL of the service on port ``key``."""
        return f"http://{self.host}:{self.ports[key]}"

    @property
    def airflow_home(self) -> Path:
        """AIRFLOW_HOME of the stack (metadata DB on the light stack, task logs, password file)."""
        return self.root / "airflow"

    @property
    def password_file(self) -> Path:
        """The simple auth manager's password file (mode 0600; never printed)."""
        return self.airflow_home / "passwords.json"

    def mlflow_secret(self, name: str) -> str:
        """A random secret of the MLflow server (``admin-password``, ``flask-secret``), created once in a 0600 file
        under ``<root>/mlflow/``; never printed."""
        return self.secret("mlflow", name)

    def s3_keys(self) -> dict[str, str]:
        """The only credentials the stack's S3 endpoint accepts (``infra.s3_server``), as AWS variables."""
        return {"AWS_ACCESS_KEY_ID": S3_KEY_ID, "AWS_SECRET_ACCESS_KEY": self.secret("s3", "secret-key")}

    def secret(self, service: str, name: str) -> str:
        """A random secret of ``service``, created once in a 0600 file ``<root>/<service>/<name>``; never printed."""
        path = self.root / service / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process created it first
                return path.read_text().strip()
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(24) + "\n")
        return path.read_text().strip()

    @property
    def pgpass_file(self) -> Path:
        """libpq password file (0600) of the stack's PostgreSQL role: clients find it through ``PGPASSFILE``."""
        return self.root / "postgres" / "pgpass"

    @property
    def dask_address(self) -> str:
        """The Dask scheduler of the celery stack."""
        return f"tcp://{self.host}:{self.ports['dask']}"

    @property
    def redis_url(self) -> str:
        """The Celery broker of the celery stack."""
        return f"redis://{self.host}:{self.ports['redis']}/0"

    def postgres_url(self, database: str, driver: str = "postgresql") -> str:
        """A password-less URL of one database (libpq reads the password from ``PGPASSFILE``)."""
        return f"{driver}://{POSTGRES_USER}@{self.host}:{self.ports['postgres']}/{database}"

    @property
    def store(self) -> str:
        """The store root the stack's Airflow tasks use."""
        return f"s3://{self.bucket}/store"

    def client_env(self) -> dict[str, str]:
        """Variables that point the CLI, tests and Airflow tasks at this stack."""
        env = {
            "DEEPSENT_STORE": self.store,
            "DEEPSENT_DATA_DIR": str(self.data_dir),
            "AWS_ENDPOINT_URL": self.url("s3"),
            "MLFLOW_S3_ENDPOINT_URL": self.url("s3"),
            "AWS_DEFAULT_REGION": "us-east-1",
            "MLFLOW_TRACKING_URI": self.url("mlflow"),
            "MLFLOW_TRACKING_USERNAME": MLFLOW_USER,
            "MLFLOW_TRACKING_PASSWORD": self.mlflow_secret("admin-password"),
            # artifacts come through the MLflow server, which logs in: never by presigned URLs straight from the
            # S3 endpoint, which takes only requests signed in their Authorization header (infra/s3_server.py)
            "MLFLOW_ENABLE_PROXY_MULTIPART_DOWNLOAD": "false",
            **self.s3_keys(),
        }
        if self.executor == "celery":
            env["DEEPSENT_DASK_ADDRESS"] = self.dask_address
        return env
