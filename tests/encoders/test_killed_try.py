"""A training try whose worker is SIGKILLed leaves no MLflow run RUNNING once its retry has run.

The first try trains in a child process that is killed with SIGKILL as soon as its MLflow run exists
(a dead Celery worker, the OOM killer); the retry (try 2 of the same Airflow task) runs in process.
It either resumes the killed try's checkpoint and MLflow run, or, when the try died before its first
checkpoint, ends that run KILLED before starting its own.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import PROJECT_ROOT, Settings

TAGS = {"airflow.dag_id": "deepsent_retrain", "airflow.dag_run_id": "manual__kill", "airflow.task_id": "train",
        "airflow.map_index": "0"}
CONFIG = {"model": "lstm", "tower": {"ncell": 16}, "epochs": 12, "patience": 2, "batch_size": 32, "seed": 5, "threads": 1}


def _runs(settings: Settings) -> list[tuple[str, str, str]]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    experiment = client.get_experiment_by_name("deepsent")
    if experiment is None:
        return []
    return [(r.info.run_id, r.info.status, r.data.tags.get("deepsent.ended_by", ""))
            for r in client.search_runs([experiment.experiment_id], filter_string="tags.`airflow.task_id` = 'train'")]


def test_a_killed_tries_mlflow_run_never_stays_running(tiny_features_store: Path, mlflow_db_template: Path,
                                                        data_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(tiny_features_store, tmp_path / "store")
    shutil.copyfile(mlflow_db_template, tmp_path / "mlflow.db")
    settings = Settings(store=str(tmp_path / "store"), data_dir=data_dir, dask_workers=1, device="cpu",
                        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    script = ("import json, sys\n"
              "from pipeline.core.config import Settings\n"
              "from encoders.training.trainer import TrainConfig, train\n"
              "s = Settings(store=sys.argv[1], data_dir=sys.argv[2], mlflow_tracking_uri=sys.argv[3], dask_workers=1, "
              "device='cpu')\n"
              "train(s, TrainConfig(**json.loads(sys.argv[4])), tags=json.loads(sys.argv[5]))\n")
    child = subprocess.Popen([sys.executable, "-c", script, settings.store, str(data_dir), settings.mlflow_tracking_uri,
                              json.dumps(CONFIG), json.dumps({**TAGS, "airflow.try_number": "1"})],
                             cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    deadline = time.monotonic() + 180
    while not any(status == "RUNNING" for _, status, _ in _runs(settings)):
        assert child.poll() is None and time.monotonic() < deadline, "the first try never started its MLflow run"
        time.sleep(0.2)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    (killed, status, _), = _runs(settings)
    assert status == "RUNNING"  # what a SIGKILL leaves behind

    result = train(settings, TrainConfig(**CONFIG), tags={**TAGS, "airflow.try_number": "2"})
    runs = {run_id: (status, ended_by) for run_id, status, ended_by in _runs(settings)}
    assert all(status in ("FINISHED", "KILLED") for status, _ in runs.values()), runs
    assert runs[result.run_id][0] == "FINISHED"
    if result.run_id != killed:  # the try died before its first checkpoint: its run was closed, not adopted
        assert runs[killed] == ("KILLED", "try 2 of the task")
