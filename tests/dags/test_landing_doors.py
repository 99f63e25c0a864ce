"""Both front doors on a team's own landing area: the retrain DAG (``simulate_days`` 0 and a date range) and
``deepsent run --from-landing`` ingest one hand-written landing area (``tests/deepsent/landing_by_hand.py``), each in
its own store and MLflow, and decide the same: the same model ships with the same figures, the gate the same."""
from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import Settings
from tests.dags.conftest import retrain_conf, xcoms
from tests.deepsent.landing_by_hand import DAYS, write_landing


def _xcom(run_id: str, task_id: str) -> Any:
    return list(xcoms(run_id, task_id).values())[-1]


@pytest.mark.slow  # the tiny chain twice: about three minutes on 2 cores
def test_both_doors_ship_the_same_model_from_one_hand_written_landing_area(
        dagbag: Any, stage_env: Settings, small_data_dir: Path, mlflow_db_template: Path, tiny_profile_registered: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deepsent.cli import main

    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(small_data_dir))
    write_landing(Path(stage_env.store))
    conf = retrain_conf(simulate_days=0, start_date=str(DAYS[0]), end_date=str(DAYS[-1]), gate_judgments="clicks")
    dag_run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 3, 4, 3, tzinfo=timezone.utc),
                                                      run_conf=conf)
    assert dag_run.state == "success"
    by_dag = {task: _xcom(dag_run.run_id, task) for task in ("ingest", "ship", "promote")}

    store = tmp_path / "cli-store"
    store.mkdir()
    shutil.copyfile(mlflow_db_template, tmp_path / "cli.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'cli.db'}")
    write_landing(store)
    assert main(["run", "--profile", "tiny", "--from-landing", "--gate-judgments", "clicks", "--store", str(store),
                 "--data-dir", str(small_data_dir)]) == 0
    import json

    by_cli = json.loads((store / "reports" / "latest" / "run.json").read_text())
    assert by_dag["ingest"]["counts"] == by_cli["counts"]["ingest"]  # the same rows read, kept and quarantined
    ship = by_dag["ship"]
    assert (ship["name"], ship["off_the_shelf"], ship["signal"]) == (by_cli["ship"]["name"], by_cli["ship"]["off_the_shelf"],
                                                                    by_cli["ship"]["signal"])
    assert ship["scores"] == pytest.approx(by_cli["ship"]["scores"], abs=1e-9) and ship["margin"] == by_cli["ship"]["margin"]
    promoted = by_dag["promote"]
    assert promoted["decision"] == by_cli["promotion"]["decision"] == "promoted"
    assert promoted["gate_set"] == by_cli["promotion"]["gate_set"]
    assert promoted["challenger_ndcg"] == pytest.approx(by_cli["promotion"]["challenger_ndcg"], abs=1e-9)
