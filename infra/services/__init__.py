"""The services of each kind of stack, in start order (``stage``, then as listed)."""
from __future__ import annotations

from infra.services.airflow import airflow_components
from infra.services.base import Service
from infra.services.celery import CELERY_AIRFLOW, DASK_CLUSTER
from infra.services.datastores import POSTGRES, REDIS
from infra.services.light import MLFLOW, S3, airflow_env

BY_EXECUTOR: dict[str, tuple[Service, ...]] = {
    "local": (S3, MLFLOW, *airflow_components(airflow_env)),
    "celery": tuple(sorted((S3, POSTGRES, REDIS, MLFLOW, *DASK_CLUSTER, *CELERY_AIRFLOW), key=lambda s: s.stage)),
}
#: Every service any stack may run (``down`` stops whichever of them has a pid file).
ALL: dict[str, Service] = {s.name: s for services in BY_EXECUTOR.values() for s in services}
