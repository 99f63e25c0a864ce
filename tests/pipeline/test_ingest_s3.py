"""The whole click path on a real S3-compatible server (moto's standalone server on 127.0.0.1)."""
from __future__ import annotations

import datetime as dt
import io
import json

import pyarrow.parquet as pq
import pytest

from pipeline.core.config import Settings
from pipeline.features.pairs import build_pairs
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import clicks_path, manifest_path
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.filesystems import boto3_client
from pipeline.storage.schemas import CLICKS_SCHEMA, LANDING_FIELDS, QUARANTINE_SCHEMA

pytestmark = pytest.mark.services
DAY = dt.date(2026, 1, 1)
PARAMS = SimParams(searches_per_day=200, users=100, bots_per_day=1, bot_searches_min=12, bot_searches_max=14)


def bucket_and_prefix(settings: Settings) -> tuple[str, str]:
    bucket, _, prefix = settings.store[len("s3://"):].partition("/")
    return bucket, prefix


def test_partition_and_quarantine_round_trip_through_s3(s3_settings: Settings) -> None:
    client = boto3_client(s3_settings)
    bucket, prefix = bucket_and_prefix(s3_settings)
    sim = simulate(s3_settings, DAY, 1, params=PARAMS)
    # an engine drops a second file straight into the landing partition with boto3
    row = {"ts": "2026-01-01T12:00:00Z", "user_id": "ext", "session_id": "ext", "impression_id": "ext.1",
           "query": "Hex Bolt", "doc_id": "100001", "title": "Hex Bolt 1/2 in.", "position": 1, "clicked": True}
    csv_text = ",".join(LANDING_FIELDS) + "\n" + ",".join(str(row[k]) for k in LANDING_FIELDS) + "\nbroken,row\n"
    client.put_object(Bucket=bucket, Key=f"{prefix}/landing/clicks/dt=2026-01-01/engine-b.csv", Body=csv_text.encode())

    result = ingest_dates(s3_settings, [DAY])
    assert result["rows_read"] == sim["lines"] + 2
    assert result["quarantined"] == sim["malformed_lines"] + 1
    assert result["rows_read"] == result["accepted"] + result["quarantined"] + result["duplicates"] + result["bot_rows"]

    keys = {o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    clicks_key = f"{prefix}/{clicks_path(DAY)}"
    quarantine_key = f"{prefix}/quarantine/ingest/dt=2026-01-01/part-0.parquet"
    assert {clicks_key, quarantine_key, f"{prefix}/{manifest_path(DAY)}"} <= keys

    clicks = pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=clicks_key)["Body"].read()))
    assert clicks.schema == CLICKS_SCHEMA and clicks.num_rows == result["accepted"]
    assert "ext" in clicks.column("user_id").to_pylist()
    quarantine = pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=quarantine_key)["Body"].read()))
    assert quarantine.schema == QUARANTINE_SCHEMA
    assert ("landing/clicks/dt=2026-01-01/engine-b.csv", 3) in {
        (r["source_file"], r["source_line"]) for r in quarantine.to_pylist()
    }
    manifest = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}/{manifest_path(DAY)}")["Body"].read())
    assert manifest["accepted"] == result["accepted"]

    before = {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in (clicks_key, quarantine_key)}
    ingest_dates(s3_settings, [DAY])
    assert {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in before} == before

    pairs = build_pairs(s3_settings)
    assert pairs["clicked_rows"] == sum(clicks.column("clicked").to_pylist())
    assert pairs["outputs"]["train"] == f"{s3_settings.store}/pairs/train.parquet"
