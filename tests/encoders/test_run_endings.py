"""Every MLflow run ends in a terminal state: a stop waits for the database write in progress, the end is written
while the SQLite database is locked by another connection, and a run a killed process left RUNNING (kill -9, or its
owner's host renamed since) is ended by the next command."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from encoders.model import tracking
from encoders.model.run_owner import ENDED_BY_TAG, HOST_TAG, PID_TAG, SPACE_TAG, owner_tags
from eval.promotion.promote import EXPERIMENT
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.runtime.interrupt import sigterm_raises
from tests.gate_sets import train_gate_set

ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}


def _db(settings: Settings) -> Path:
    return Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///"))


@pytest.fixture()
def tracked(settings: Settings, mlflow_db_template: Path) -> Settings:
    """``settings`` with an initialised MLflow database (a copy of the template: no migrations to run)."""
    _db(settings).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mlflow_db_template, _db(settings))
    return settings


def _lock(db: Path) -> Any:
    """A process holding ``db`` locked (BEGIN EXCLUSIVE) until a line is written to its stdin."""
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys\n"
                               f"c = sqlite3.connect({str(db)!r}, isolation_level=None, timeout=30)\n"
                               "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True)\n"
                               "sys.stdin.readline(); c.execute('COMMIT')\n"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def _release(holder: Any) -> None:
    holder.communicate("\n", timeout=30)


def _statuses(settings: Settings, experiment: str) -> dict[str, str]:
    from mlflow import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    found = client.get_experiment_by_name(experiment)
    return {} if found is None else {r.info.run_id: r.info.status for r in client.search_runs([found.experiment_id])}


def test_a_sigint_during_a_locked_database_write_is_raised_after_it(tracked: Settings) -> None:
    from mlflow import MlflowClient

    settings = tracked

    client = MlflowClient(settings.mlflow_tracking_uri)
    run_id = client.create_run(tracking.experiment_id(settings, "writes")).info.run_id
    holder = _lock(_db(settings))
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # while the write below waits for the lock
    threading.Timer(1.0, _release, (holder,)).start()
    written = False
    with pytest.raises(KeyboardInterrupt):
        with sigterm_raises():
            client.set_tag(run_id, "deepsent.step", "written")  # waits for the lock; the SIGINT arrives meanwhile
            written = True
            time.sleep(5)  # the SIGINT is raised here, once the write has returned
    assert written and client.get_run(run_id).data.tags["deepsent.step"] == "written"
    client.set_terminated(run_id, "KILLED")  # the database is not left locked by the interrupted session


def _promote(settings: Settings, uri: str, gate: Path) -> subprocess.Popen:
    env = {**ENV, "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri, "DEEPSENT_DATA_DIR": str(settings.data_dir)}
    return subprocess.Popen([sys.executable, "-m", "deepsent.cli", "promote", "--model-uri", uri, "--gate-judgments",
                             str(gate), "--store", settings.store], cwd=PROJECT_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_sigint_during_promote_with_the_database_locked_ends_its_run_killed(
        registry: Settings, promotion_registry: dict[str, Any], tmp_path: Path) -> None:
    gate = train_gate_set(registry, tmp_path / "gate.csv")
    db = _db(registry)
    proc = _promote(registry, promotion_registry["uris"]["lexical"], gate)
    deadline = time.monotonic() + 120
    while "RUNNING" not in _statuses(registry, EXPERIMENT).values():  # its run exists: the next writes follow at once
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no run"
        time.sleep(0.01)
    holder = _lock(db)  # another connection holds the database for a moment ...
    time.sleep(0.5)  # ... the promote's next write waits for it ...
    proc.send_signal(signal.SIGINT)  # ... and the promote is stopped meanwhile
    time.sleep(1.0)
    _release(holder)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "database is locked" not in err and "deepsent: error: interrupted" in err
    (run_id, status), = _statuses(registry, EXPERIMENT).items()
    assert status == "KILLED", err[-3000:]
    assert f"MLflow run {run_id} ended KILLED" in err


def test_kill_9_of_train_then_the_next_command_ends_its_run(
        train_settings: Settings, train_until_checkpoint: Callable[..., subprocess.Popen],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from deepsent.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", train_settings.mlflow_tracking_uri)
    flags = ["--model", "lstm", "--ncell", "8", "--epochs", "30", "--patience", "30", "--batch-size", "32",
             "--seed", "3", "--device", "cpu", "--threads", "1"]
    proc = train_until_checkpoint(train_settings, flags)
    proc.kill()
    proc.communicate(timeout=60)
    (killed, status), = _statuses(train_settings, "deepsent").items()
    assert status == "RUNNING"  # what a kill -9 leaves behind
    assert main(["train", *flags[:4], "--epochs", "1", "--seed", "4", "--device", "cpu", "--threads", "1",
                 "--store", train_settings.store]) == 0
    statuses = _statuses(train_settings, "deepsent")
    assert statuses.pop(killed) == "KILLED" and list(statuses.values()) == ["FINISHED"]
    from mlflow import MlflowClient

    assert MlflowClient(train_settings.mlflow_tracking_uri).get_run(killed).data.tags[ENDED_BY_TAG].startswith("run pid ")


OWNER_UNDER_ANOTHER_NAME = """
import os, socket, sys, time
socket.gethostname = lambda: sys.argv[2]  # the host as it was named before a rename
from encoders.model import tracking
from pipeline.core.config import Settings
with tracking.run(Settings(store=sys.argv[1], data_dir=sys.argv[1], mlflow_tracking_uri=sys.argv[3]), "owners") as active:
    print(active.info.run_id, flush=True)
    if sys.argv[4] == "killed":
        os._exit(0)  # ends like a kill -9: the run is left RUNNING
    time.sleep(120)
"""


def test_run_owners_are_judged_by_their_process_space_after_a_host_name_change(tracked: Settings) -> None:
    from mlflow import MlflowClient

    settings = tracked

    uri = settings.mlflow_tracking_uri
    experiment = tracking.experiment_id(settings, "owners")  # before the owners start: neither creates it
    owners = {how: subprocess.Popen([sys.executable, "-c", OWNER_UNDER_ANOTHER_NAME, settings.store, "before-rename",
                                     uri, how], cwd=PROJECT_ROOT, env=ENV, stdout=subprocess.PIPE, text=True)
              for how in ("killed", "alive")}
    try:
        runs = {how: proc.stdout.readline().strip() for how, proc in owners.items()}
        owners["killed"].wait(timeout=60)
        client = MlflowClient(uri)
        assert client.get_run(runs["killed"]).data.tags[HOST_TAG] == "before-rename"
        elsewhere = client.create_run(experiment, tags={
            **owner_tags(), PID_TAG: str(owners["killed"].pid), SPACE_TAG: "another-boot/pid:[1]"}).info.run_id
        with tracking.run(settings, "owners"):  # this host's next run, under its new name
            pass
        assert {how: client.get_run(run_id).info.status for how, run_id in runs.items()} == {
            "killed": "KILLED", "alive": "RUNNING"}
        assert client.get_run(elsewhere).info.status == "RUNNING"  # another machine's (or container's) run: left
    finally:
        owners["alive"].kill()
        owners["alive"].wait()
