"""Two ``deepsent serve`` replicas on one S3 store (the local S3 endpoint, ``--store s3://…``) answer from it, and a
``deepsent index`` published to that store reaches both within their poll interval: clients spread over both see no
failed request, every answer is one build's answer, and each client moves from the old build to the new, never back.
"""
from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.deepsent.conftest import first_rows_data_dir
from tests.deepsent.serve_load import Clients, build_answers, publish_index, wait_until
from tests.deepsent.serve_process import Served, metric, private_index, start

pytestmark = [pytest.mark.services, pytest.mark.slow]  # a real S3 endpoint, two uvicorn servers, deepsent index


def _s3_env(endpoint: str) -> dict[str, str]:
    """The variables a replica and ``deepsent index`` read to reach the local S3 endpoint (dummy credentials)."""
    return {"AWS_ACCESS_KEY_ID": "testing-key-id", "AWS_SECRET_ACCESS_KEY": "testing-secret-key",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}


@pytest.fixture()
def s3_index(small_index: dict[str, Any], s3_endpoint: str, tmp_path: Path) -> dict[str, Any]:
    """The small index's store uploaded to a fresh bucket (its MLflow database a private copy)."""
    import boto3

    local = private_index(small_index, tmp_path)
    bucket = f"deepsent-serve-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing-key-id",
                      aws_secret_access_key="testing-secret-key")
    s3.create_bucket(Bucket=bucket)
    files = [path for path in sorted(local["store"].rglob("*")) if path.is_file()]
    for path in files:
        s3.upload_file(str(path), bucket, f"store/{path.relative_to(local['store']).as_posix()}")
    assert files, "the small index's store is empty"
    return {**local, "store": f"s3://{bucket}/store", "env": _s3_env(s3_endpoint)}


def _swaps(served: Served) -> float:
    with served.client() as client:
        return metric(client.get("/metrics").text, "deepsent_serve_swaps_total")


def test_two_replicas_on_one_s3_store_swap_to_a_publish_without_a_failed_or_mixed_answer(
        s3_index: dict[str, Any], tmp_path: Path) -> None:
    replicas = [start(s3_index, "--poll-seconds", "0.5", env=s3_index["env"]) for _ in range(2)]
    try:
        (old, before), same = build_answers(replicas[0]), build_answers(replicas[1])
        assert same == (old, before)  # both serve the store's build, the same answers
        other_corpus = first_rows_data_dir(s3_index["data_dir"], tmp_path / "data-1500", rows=1500)
        with Clients(replicas[0], 2) as first, Clients(replicas[1], 2) as second:
            published = time.monotonic()
            publish_index(s3_index, s3_index["model_uri"], other_corpus)
            indexed_s = time.monotonic() - published
            wait_until(lambda: all(len(clients.builds()) == 2 for clients in (first, second)), "a replica kept the old build")
            reached_s = time.monotonic() - published
            time.sleep(1.0)  # answers of the new build from both for a while
        (new, after), also = build_answers(replicas[0]), build_answers(replicas[1])
        swaps = [_swaps(served) for served in replicas]
    finally:
        codes = [served.stop() for served in replicas]
    assert codes == [0, 0] and swaps == [1, 1]
    assert new != old and also == (new, after) and after != before
    expected = {old: before, new: after}
    answers = [answer for clients in (first, second) for client in clients.seen for answer in client]
    failed = [answer for answer in answers if answer[0] != 200]
    assert len(answers) > 100 and not failed, failed[:3]
    for _, build, query, mode, hits in answers:
        assert hits == expected[build][(query, mode)], (build, query, mode)
    assert min(Counter(build for _, build, *_ in answers).values()) >= 10  # the publish came in the middle of the load
    for clients in (first, second):
        for client in clients.seen:
            order = [build for _, build, *_ in client]
            assert order == sorted(order, key=[old, new].index)
    print(f"two replicas on S3: {len(answers)} answers, 0 failed; the publish took {indexed_s:.1f} s; both replicas "
          f"answered from the new build {reached_s:.1f} s after it began")
