"""Every MLflow run deepsent starts names its owning process; a new run ends KILLED the runs of its experiment
whose owner on this host was killed, and leaves alone a live owner's, another host's and (outside promote's lock)
an ownerless one. The promote kill test (tests/deepsent/test_promote_kills.py) drives the same through the CLI."""
from __future__ import annotations

import socket
import subprocess
import sys

from encoders.model import tracking
from encoders.model.run_owner import ENDED_BY_TAG, HOST_TAG, PID_TAG, STAGE_TAG, end_left_runs, owner_tags
from pipeline.core.config import Settings


def test_a_new_run_ends_the_runs_killed_owners_left(settings: Settings) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    experiment = tracking.experiment_id(settings, "owners")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()  # a pid whose process has exited
    owners = {
        "killed": {HOST_TAG: socket.gethostname(), PID_TAG: gone, "deepsent.pid_started": "1"},
        "alive": owner_tags(),
        "elsewhere": {HOST_TAG: "another-host", PID_TAG: gone, "deepsent.pid_started": "1"},
        "ownerless": {STAGE_TAG: "promote"},
    }
    left = {name: client.create_run(experiment, tags=tags, run_name=name).info.run_id for name, tags in owners.items()}
    with tracking.run(settings, "owners", run_name="next") as active:
        mine = client.get_run(active.info.run_id).data.tags
    assert mine[PID_TAG] == owner_tags()[PID_TAG] and mine[HOST_TAG] == socket.gethostname()
    status = {name: client.get_run(run_id).info.status for name, run_id in left.items()}
    assert status == {"killed": "KILLED", "alive": "RUNNING", "elsewhere": "RUNNING", "ownerless": "RUNNING"}
    assert client.get_run(left["killed"]).data.tags[ENDED_BY_TAG].startswith("run pid ")
    assert client.get_run(active.info.run_id).info.status == "FINISHED"
    # promote, under its lock, also ends its stage's runs written before owners were recorded
    assert end_left_runs(settings, "owners", stage="promote") == [left["ownerless"]]
    assert client.get_run(left["alive"]).info.status == "RUNNING"
