"""Both front doors on a team's own landing area: the retrain DAG (``simulate_days`` 0 and a date range) and
``deepsent run --from-landing`` (the suite's shared ``landing_chain``) ingest one hand-written landing area
(``tests/deepsent/landing_by_hand.py``), each in its own store and MLflow (the DAG's store starts with the landing
area and the vector store that run left: a cache keyed by model part and text, read first by every stage that
encodes; no index, report or registry of it), and decide the same: the same model ships
with the same figures, the gate the same. The DAG's run is the suite's first promotion through the DAG: its champion
event names the run and the model, and its index stage indexes that champion from the vectors the chain stored."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import Settings
from tests.dags.conftest import asset_extras, retrain_conf, xcoms
from tests.deepsent.landing_by_hand import DAYS
from tests.tiny_chain import LandingChain


def _xcom(run_id: str, task_id: str) -> Any:
    return list(xcoms(run_id, task_id).values())[-1]


def _version_tags(settings: Settings, version: str) -> dict[str, str]:
    """The registry version's tags but the promotion run's id (each door has its own MLflow)."""
    from mlflow import MlflowClient

    tags = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).get_model_version("deepsent-ranker", version).tags
    return {k: v for k, v in tags.items() if k not in ("deepsent.promotion_run",)}


@pytest.mark.slow  # the tiny chain through the DAG: about two minutes on 2 cores (deepsent run's is shared)
def test_both_doors_ship_the_same_model_from_one_hand_written_landing_area(
        dagbag: Any, stage_env: Settings, small_data_dir: Path, landing_chain: LandingChain,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(small_data_dir))
    landing_chain.seed(Path(stage_env.store))  # the same landing area, and the vectors that run stored (a cache)
    conf = retrain_conf(simulate_days=0, start_date=str(DAYS[0]), end_date=str(DAYS[-1]), gate_judgments="clicks")
    dag_run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 3, 4, 3, tzinfo=timezone.utc),
                                                      run_conf=conf)
    assert dag_run.state == "success"
    by_dag = {task: _xcom(dag_run.run_id, task) for task in ("ingest", "ship", "promote", "index")}

    by_cli = landing_chain.record
    assert by_dag["ingest"]["counts"] == by_cli["counts"]["ingest"]  # the same rows read, kept and quarantined
    ship = by_dag["ship"]
    assert (ship["name"], ship["off_the_shelf"], ship["signal"]) == (by_cli["ship"]["name"], by_cli["ship"]["off_the_shelf"],
                                                                    by_cli["ship"]["signal"])
    assert ship["scores"] == pytest.approx(by_cli["ship"]["scores"], abs=1e-9) and ship["margin"] == by_cli["ship"]["margin"]
    promoted = by_dag["promote"]
    assert promoted["decision"] == by_cli["promotion"]["decision"] == "promoted"  # the first model: no champion
    assert promoted["gate_set"] == by_cli["promotion"]["gate_set"]
    assert promoted["challenger_ndcg"] == pytest.approx(by_cli["promotion"]["challenger_ndcg"], abs=1e-9)
    assert promoted["served"] == by_cli["promotion"]["served"]  # the gate's served search, figure for figure
    assert _version_tags(stage_env, promoted["version"]) == _version_tags(
        stage_env.with_overrides(mlflow_tracking_uri=landing_chain.mlflow_tracking_uri), by_cli["promotion"]["version"])
    # a promotion through the DAG updates deepsent_champion, naming the run and the model offered
    champion = asset_extras("deepsent_champion")[-1]
    assert champion["dag_run_id"] == dag_run.run_id and champion["challenger_uri"] == ship["model_uri"]
    assert champion["model_uri"] == promoted["model_uri"] == f"models:/deepsent-ranker/{promoted['version']}"
    built = by_dag["index"]  # the chain's index stage indexed that champion from the vectors the encode stage stored
    assert built["model_uri"] == champion["model_uri"] and built["encoded"] == 0
    assert asset_extras("deepsent_index")[-1]["version"] == built["version"]
