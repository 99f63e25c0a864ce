"""The local Dask cluster: one process may start one cluster after another (forked workers); no worker profiler."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from pipeline.config import Settings

ROOT = Path(__file__).resolve().parents[2]

# 12 MiB each way is above distributed.comm.offload (10 MiB): the first cluster's messages start the driver's
# offload thread, which the second cluster's forked worker inherits dead unless it is given a new pool
TWO_CLUSTERS = """
import numpy as np
from pipeline.config import Settings
from pipeline.dask_cluster import dask_client
payload = np.arange(12 * 2**20 // 8, dtype=np.int64)
for cluster in range(2):
    with dask_client(Settings.from_env().with_overrides(dask_workers=1, dask_address="")) as client:
        back = client.submit(np.negative, client.scatter(payload)).result()
        assert np.array_equal(back, -payload)
    print("cluster", cluster, "ok", flush=True)
"""


def test_a_later_local_cluster_moves_messages_above_the_offload_threshold(settings: Settings) -> None:
    # in a child process with a deadline: the failure this guards against is a hang, not an exception
    proc = subprocess.Popen([sys.executable, "-c", TWO_CLUSTERS], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    assert proc.returncode == 0 and "cluster 1 ok" in output, output[-3000:]


def _callbacks(dask_worker) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(dask_worker.periodic_callbacks)


def test_local_workers_run_without_the_statistical_profiler(settings: Settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pipeline.dask_cluster import PROFILER_SWITCH, dask_client

    monkeypatch.delenv(PROFILER_SWITCH, raising=False)
    with dask_client(settings.with_overrides(dask_workers=1, dask_address="")) as client:
        callbacks = next(iter(client.run(_callbacks).values()))
    assert "heartbeat" in callbacks and "profile" not in callbacks, callbacks
    monkeypatch.setenv(PROFILER_SWITCH, "True")  # Dask's own switch set: its config (default: on) is left alone
    with dask_client(settings.with_overrides(dask_workers=1, dask_address="")) as client:
        assert "profile" in next(iter(client.run(_callbacks).values()))
