"""The stack's S3 endpoint, started alone the way ``deepsent stack up`` starts it: only signed requests pass.

MLflow and Airflow answer an anonymous call with 401; the S3 endpoint, the store of every Airflow task,
refuses one with 403: an unsigned PUT into the store's bucket, a request signed with another key or secret,
and moto's admin API (which could turn authentication off or reset the data).
"""
from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from infra import stack
from infra.config import StackConfig
from infra.services.light import S3
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.infra.rest import free_port


def _http(method: str, url: str, body: bytes | None = None) -> int:
    """The status of an anonymous (unsigned) request."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method), timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture()
def s3_service(tmp_path: Path) -> Iterator[StackConfig]:
    """The stack's S3 service alone on a free port, its bucket created; stopped afterwards."""
    cfg = StackConfig.from_env({**os.environ, "DEEPSENT_STACK_DIR": str(tmp_path / "stack"),
                                "DEEPSENT_S3_PORT": str(free_port())})
    proc = stack._launch(cfg, S3)
    try:
        stack._wait_healthy(cfg, {S3.name: proc}, timeout=120)
        S3.ready(cfg)
        yield cfg
    finally:
        stack._stop(cfg, S3.name, grace=5.0)


@pytest.mark.services
def test_the_stack_s3_endpoint_takes_only_requests_signed_with_its_key(s3_service: StackConfig,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from botocore.exceptions import ClientError

    cfg, endpoint = s3_service, s3_service.url("s3")
    secret = cfg.root / "s3" / "secret-key"
    assert secret.stat().st_mode & 0o777 == 0o600 and cfg.s3_keys()["AWS_SECRET_ACCESS_KEY"] == secret.read_text().strip()
    assert _http("PUT", f"{endpoint}/{cfg.bucket}/store/anonymous.txt", b"x") == 403
    assert _http("GET", f"{endpoint}/{cfg.bucket}") == 403 and _http("GET", f"{endpoint}/") == 403
    assert _http("POST", f"{endpoint}/moto-api/reset-auth", b"inf") == 403  # authentication cannot be turned off
    assert _http("POST", f"{endpoint}/moto-api/reset") == 403 and _http("GET", f"{endpoint}/moto-api/data.json") == 403
    for key_id, key in (("deepsent-stack", "not-the-secret"), ("someone-else", "any")):
        other = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                             aws_secret_access_key=key)
        with pytest.raises(ClientError, match="SignatureDoesNotMatch|InvalidAccessKeyId"):
            other.put_object(Bucket=cfg.bucket, Key="store/forged.txt", Body=b"x")
    for name, value in cfg.client_env().items():  # what the CLI and Airflow's tasks use
        monkeypatch.setenv(name, value)
    store = Store.from_settings(Settings.from_env())
    store.check()
    store.write_text("signed.txt", "signed by the stack's key")
    assert store.read_text("signed.txt") == "signed by the stack's key"
    assert store.list_files("") == ["signed.txt"]  # nothing anonymous or forged landed
