"""Data-parallel training with 2 CPU processes (gloo): same global batch, same loss curve as 1 process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import PROJECT_ROOT, Settings

CONFIG: dict[str, Any] = dict(model="lstm", tower={"ncell": 16}, epochs=3, batch_size=32, lr=0.05, th_G=1.0,
                              patience=10, seed=3, threads=1)


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid`` from /proc, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def _live_parents() -> dict[int, int]:
    """Parent pid of every live process (zombies excluded)."""
    stats = {int(path.parent.name): _stat(path.parent.name) for path in Path("/proc").glob("[0-9]*/stat")}
    return {pid: stat[1] for pid, stat in stats.items() if stat is not None and stat[0] != "Z"}


def _children() -> dict[int, str]:
    """Live child processes of this test process, except multiprocessing's resource tracker: one helper per
    parent by design, which exits with the parent."""
    me = os.getpid()
    return {pid: cmd[:200] for pid, parent in _live_parents().items()
            if parent == me and "multiprocessing.resource_tracker" not in (cmd := _cmdline(pid))}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _curve(result: dict[str, Any]) -> list[tuple[float, float]]:
    return [(h["train_loss"], h["valid_loss"]) for h in result.history]


def test_two_processes_follow_one(make_train_settings: Callable[[str], Settings]) -> None:
    before = _children()
    single = train(make_train_settings("one"), TrainConfig(**CONFIG))
    double = train(make_train_settings("two"), TrainConfig(**{**CONFIG, "nproc": 2}))
    assert double.nproc == 2 and single.nproc == 1
    assert len(double.history) == len(single.history) == 3
    for (t1, v1), (t2, v2) in zip(_curve(single), _curve(double)):
        assert t2 == pytest.approx(t1, rel=1e-3) and v2 == pytest.approx(v1, rel=1e-3)
    assert _curve(single)[0] != _curve(single)[-1]  # it did train
    left = {pid: cmd for pid, cmd in _children().items() if pid not in before}
    assert not left, f"worker processes left behind: {left}"


def test_same_command_under_torchrun(make_train_settings: Callable[[str], Settings]) -> None:
    settings = make_train_settings("torchrun")
    env = {**os.environ, "DEEPSENT_STORE": settings.store, "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
           "DEEPSENT_DATA_DIR": str(settings.data_dir), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "deepsent.cli", "train", "--json", "--model", "dssm", "--nhid", "16", "--nout", "8",
           "--epochs", "1", "--batch-size", "64", "--device", "cpu", "--threads", "1"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(objects) == 1 and objects[0]["nproc"] == 2 and objects[0]["registered_name"] == "deepsent-dssm"


def _descendants(pid: int) -> set[int]:
    """Live processes below ``pid`` (from /proc), zombies excluded."""
    parents = _live_parents()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, or a pid gone from /proc, is not alive)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def test_sigterm_to_the_parent_stops_every_rank_and_ends_the_run_killed(
        make_train_settings: Callable[[str], Settings], train_until_checkpoint: Callable[..., subprocess.Popen]) -> None:
    from mlflow import MlflowClient

    settings = make_train_settings("sigterm-ddp")
    flags = ["--model", "lstm", "--ncell", "16", "--epochs", "20", "--batch-size", "32", "--lr", "0.05",
             "--patience", "20", "--seed", "3", "--device", "cpu", "--threads", "1", "--nproc", "2"]
    proc = train_until_checkpoint(settings, flags, {"OMP_NUM_THREADS": "1"})
    workers = _descendants(proc.pid)
    helpers = {pid for pid in workers if "multiprocessing.resource_tracker" in _cmdline(pid)}
    assert len(workers - helpers) >= 2, workers  # the two ranks
    proc.send_signal(signal.SIGTERM)  # to the parent only, as Airflow's task runner does
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err.decode()[-3000:]
    ranks_left = {pid for pid in workers - helpers if _alive(pid)}
    assert not ranks_left, f"a rank outlived its parent: {ranks_left}"
    # multiprocessing's resource tracker exits on its own once its parent's pipe closes: give it a moment
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not {pid for pid in helpers if _alive(pid)}, "the resource tracker outlived its parent by 20 s"
    (run,) = MlflowClient(settings.mlflow_tracking_uri).search_runs(
        [e.experiment_id for e in MlflowClient(settings.mlflow_tracking_uri).search_experiments()])
    assert run.info.status == "KILLED", err.decode()[-3000:]
    progress = [json.loads(p.read_text()) for p in Path(settings.store, "checkpoints").rglob("progress.json")]
    assert len(progress) == 1 and not progress[0]["finished"] and progress[0]["epoch"] >= 1
