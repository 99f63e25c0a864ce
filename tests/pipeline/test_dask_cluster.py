"""The local Dask cluster: one process may start one cluster after another (forked workers); monitoring turned down."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from pipeline.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]

# 12 MiB each way is above distributed.comm.offload (10 MiB): the first cluster's messages start the driver's
# offload thread, which the second cluster's forked worker inherits dead unless it is given a new pool
TWO_CLUSTERS = """
import numpy as np
from pipeline.core.config import Settings
from pipeline.runtime.dask_cluster import dask_client
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


def _intervals(server) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Periodic callbacks of a Dask server (worker or scheduler) and their interval in ms."""
    return {name: pc.callback_time for name, pc in server.periodic_callbacks.items()}


def _worker_intervals(dask_worker) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return _intervals(dask_worker)  # Client.run passes the worker by this keyword


def _scheduler_intervals(dask_scheduler) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return _intervals(dask_scheduler)  # Client.run_on_scheduler passes the scheduler by this keyword


def test_dask_env_var_is_the_one_dask_reads(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import dask

    from pipeline.runtime.dask_cluster import LOCAL_OVERRIDES, dask_env_var

    for key in LOCAL_OVERRIDES:
        monkeypatch.setenv(dask_env_var(key), "sentinel")
        assert dask.config.get(key, config=dask.config.collect_env()) == "sentinel", key
        monkeypatch.delenv(dask_env_var(key))


def test_local_clusters_turn_down_the_profiler_and_the_tick(settings: Settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import dask
    from dask.utils import parse_timedelta

    from pipeline.runtime.dask_cluster import LOCAL_OVERRIDES, dask_client, dask_env_var

    local = settings.with_overrides(dask_workers=1, dask_address="")
    for key in LOCAL_OVERRIDES:
        monkeypatch.delenv(dask_env_var(key), raising=False)
    with dask_client(local) as client:
        worker = next(iter(client.run(_worker_intervals).values()))
        scheduler = client.run_on_scheduler(_scheduler_intervals)
    assert "heartbeat" in worker and "profile" not in worker, worker
    assert worker["tick"] == scheduler["tick"] == 500, (worker, scheduler)
    # Dask's own variables set: its config (defaults: profiler on, tick every 20 ms) is left alone
    for key in LOCAL_OVERRIDES:
        monkeypatch.setenv(dask_env_var(key), str(dask.config.get(key)))
    with dask_client(local) as client:
        worker = next(iter(client.run(_worker_intervals).values()))
    assert "profile" in worker, worker
    assert worker["tick"] == parse_timedelta(dask.config.get("distributed.admin.tick.interval")) * 1000 != 500


def test_a_workers_reported_error_is_one_line_without_its_traceback(settings: Settings, tmp_path: Path) -> None:
    """Bad input raised inside a Dask worker: only the client's one line, not the worker's "Compute Failed" dump;
    a bug (any other exception) is still logged with its traceback."""
    deepsent = Path(sys.executable).parent / "deepsent"
    env = {**os.environ, "DEEPSENT_DASK_WORKERS": "2", "DEEPSENT_STORE": str(tmp_path / "store")}
    done = subprocess.run([str(deepsent), "simulate", "--days", "1", "--param", "searches_per_day=200"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    day = tmp_path / "store" / "landing" / "clicks" / "dt=2026-01-01"
    for i in (1, 2, 3):  # several files: they are read on the workers
        (day / f"part-{i}.jsonl").write_bytes((day / "part-0.jsonl").read_bytes())
    (day / "part-2.jsonl").write_bytes(b"\xff\xfe\x00not utf-8")
    done = subprocess.run([str(deepsent), "ingest", "--date", "2026-01-01"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert "Compute Failed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"deepsent: error: {day / 'part-2.jsonl'}: wrong encoding")
    bug = ("import logging\nfrom pipeline.core.config import Settings\nfrom pipeline.runtime.dask_cluster import dask_client\n"
           "with dask_client(Settings.from_env().with_overrides(dask_workers=1, dask_address='')) as client:\n"
           "    try:\n        client.submit(lambda: 1 / 0).result()\n    except ZeroDivisionError:\n        print('raised')\n")
    done = subprocess.run([sys.executable, "-c", bug], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "raised" in done.stdout and "Compute Failed" in done.stderr and "ZeroDivisionError" in done.stderr
