"""MLflow's info lines reach a task's log at INFO, not as stderr (which Airflow logs as ERROR), and its
artifact-download progress bar stays off the task log.

Each case runs in a fresh interpreter, as a task process does: MLflow configures its loggers when
first imported, and registering a model prints "Successfully registered model ..." to stderr.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.core.config import PROJECT_ROOT

_REGISTER = """
    import json, logging
    import mlflow
    sys.path.insert(0, {dags!r})
    from _wiring import log_mlflow_at_its_levels
    if {route}:
        log_mlflow_at_its_levels()
    records = []
    class Capture(logging.Handler):
        def emit(self, record):
            records.append([record.name, record.levelname, record.getMessage()])
    logging.getLogger().addHandler(Capture())
    logging.getLogger().setLevel(logging.INFO)
    mlflow.set_tracking_uri({uri!r})
    with mlflow.start_run() as run:
        mlflow.log_text("x", "model/MLmodel")
    mlflow.register_model(f"runs:/{{run.info.run_id}}/model", "deepsent-logtest")
    mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="model", dst_path="downloaded")
    print("RECORDS=" + json.dumps([r for r in records if r[0].split(".")[0] == "mlflow"]))
"""


@pytest.mark.heavy  # over 10 s: left out of make check
@pytest.mark.parametrize("route", [True, False])
def test_mlflow_registration_lines_are_info_records(route: bool, tmp_path: Path) -> None:
    code = "import sys\n" + textwrap.dedent(_REGISTER).format(dags=str(PROJECT_ROOT / "dags"), route=route,
                                                                uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    records = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RECORDS="))[len("RECORDS="):])
    registered = [r for r in records if r[2] == "Successfully registered model 'deepsent-logtest'."]
    if route:  # in a task: one INFO record, nothing on stderr
        assert registered == [["mlflow", "INFO", "Successfully registered model 'deepsent-logtest'."]]
        assert ["mlflow", "INFO", "Created version '1' of model 'deepsent-logtest'."] in records
        assert all(level == "INFO" for _, level, _ in records)
        assert out.stderr == ""
    else:  # MLflow's own set-up: straight to stderr, which a task log shows as ERROR
        assert registered == []
        assert "Successfully registered model 'deepsent-logtest'." in out.stderr
        assert "Downloading artifacts" in out.stderr  # MLflow's progress bar, even where stderr is no terminal
