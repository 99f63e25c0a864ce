"""A real distributed run: `dask scheduler` + two `dask worker` processes on 127.0.0.1.

``DEEPSENT_DASK_ADDRESS`` points ``featurize`` at the scheduler; the shards must be byte for
byte those of the local cluster. Every process started here is stopped afterwards.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from bench.stages.featurize import write_judged_pairs
from pipeline.core.config import Settings
from pipeline.features.featurize import featurize
from pipeline.storage.store import Store

DASK = str(Path(sys.executable).with_name("dask"))
pytestmark = pytest.mark.services


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a dask CLI process in its own process group, logging to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen([DASK, *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of ``proc`` (that we started), then SIGKILL if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture()
def scheduler_address(tmp_path: Path) -> Iterator[str]:
    """Address of a scheduler with two single-threaded workers, all on 127.0.0.1."""
    from dask.distributed import Client

    info = tmp_path / "scheduler.json"
    procs = [_start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                     "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(info)], tmp_path / "scheduler.log")]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.1)
        assert info.exists(), (tmp_path / "scheduler.log").read_text()
        for i in range(2):
            procs.append(_start(["worker", "--scheduler-file", str(info), "--host", "127.0.0.1", "--nthreads", "1",
                                 "--no-nanny", "--no-dashboard", "--name", f"w{i}"], tmp_path / f"worker{i}.log"))
        address = json.loads(info.read_text())["address"]
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=90)
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)
    assert all(proc.poll() is not None for proc in procs)


def test_remote_cluster_writes_the_same_shards_as_the_local_cluster(
    scheduler_address: str, settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_judged_pairs(store, settings, max_queries=400)
    local = featurize(settings, shard_rows=500)
    written = {p: store.read_bytes(p) for p in store.list_files(f"features/{local.version}")}
    store.delete("features")
    monkeypatch.setenv("DEEPSENT_DASK_ADDRESS", scheduler_address)
    remote_settings = Settings.from_env(store=settings.store, data_dir=str(settings.data_dir))
    assert remote_settings.dask_address == scheduler_address
    remote = featurize(remote_settings, shard_rows=500)
    assert remote.version == local.version and len(remote.uris["train"]) >= 4
    # shards, vocab.json and manifest.json: byte for byte those of the local cluster
    assert {p: store.read_bytes(p) for p in store.list_files(f"features/{remote.version}")} == written


def test_an_unreachable_scheduler_is_a_clear_error(settings: Settings) -> None:
    from pipeline.runtime.dask_cluster import dask_client
    from pipeline.core.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9 within 2 s"):
        with dask_client(settings.with_overrides(dask_address="tcp://127.0.0.1:9"), connect_timeout_s=2):
            pass
