"""Shared pytest fixtures: settings on a temporary store, the real shared data, a real S3 endpoint."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from pipeline.config import Settings
from pipeline.store import Store

# Tests never use a GPU by accident and keep to the 2 cores of CI.
os.environ.setdefault("DEEPSENT_DEVICE", "cpu")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real shared data (../shared/data beside the project, or DEEPSENT_DATA_DIR)."""
    settings = Settings.from_env()
    if not settings.train_judgments.exists():
        pytest.fail(f"shared data not found at {settings.data_dir}; set DEEPSENT_DATA_DIR")
    return settings.data_dir


@pytest.fixture()
def settings(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on a fresh local store under ``tmp_path`` with a local SQLite MLflow store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DEEPSENT_DASK_ADDRESS", raising=False)
    return Settings.from_env(store=str(tmp_path / "store"), data_dir=str(data_dir), dask_workers=1)


@pytest.fixture()
def store(settings: Settings) -> Store:
    """The local store of ``settings``."""
    return Store.from_settings(settings)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible server (moto's standalone server) on 127.0.0.1; stopped afterwards."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture()
def s3_settings(s3_endpoint: str, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose store is a fresh bucket on the local S3 endpoint (dummy credentials)."""
    import uuid

    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-key")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    bucket = f"deepsent-test-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return Settings.from_env(
        store=f"s3://{bucket}/prefix",
        data_dir=str(data_dir),
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        dask_workers=1,
    )
