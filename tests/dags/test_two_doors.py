"""One chain, two front doors: the retrain DAG (``dag.test()``) and ``deepsent run`` ship the same model by one rule.

Both doors run the same tiny profile on the same simulated days and seed, each in its own store and
MLflow (the suite's shared runs: ``tiny_chain`` for ``deepsent run``, ``tiny_dag_run`` for the DAG): the same model ships with the same gate-set figures, the gate (on the gate slice) decides
the same with the same tags, and the table has the same rows. Then, in one store, a champion promoted
by ``deepsent run`` is challenged by the DAG with a model of its own kind, and a champion refused too
often is reported stale through the failure notification and by ``deepsent promote --status``.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import Settings
from tests.dags.conftest import TINY_DAG_GROUP, DagRun, retrain_conf, xcoms
from tests.tiny_chain import TinyChain, copy_of


def _xcom(run_id: str, task_id: str) -> Any:
    """The (unmapped) task's return value."""
    return list(xcoms(run_id, task_id).values())[-1]


def _version_tags(settings: Settings, version: str) -> dict[str, str]:
    from mlflow import MlflowClient

    tags = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).get_model_version("deepsent-ranker", version).tags
    return {k: v for k, v in tags.items() if k not in ("deepsent.promotion_run",)}


@pytest.mark.slow
@TINY_DAG_GROUP
def test_the_dag_and_deepsent_run_ship_the_same_model(tiny_dag_run: DagRun, tiny_chain: TinyChain) -> None:
    by_cli = tiny_chain.result  # deepsent run of the same profile on the same data and seed, in its own store
    dag_run, stage_env = tiny_dag_run, tiny_dag_run.settings  # the DAG's run of it, in a fresh store of its own
    assert dag_run.state == "success" and stage_env.data_dir == tiny_chain.settings.data_dir
    ship, promoted, table, searched = (_xcom(dag_run.run_id, t) for t in ("ship", "promote", "compare", "search"))

    assert ship["name"] == by_cli["ship"]["name"] and ship["off_the_shelf"] == by_cli["ship"]["off_the_shelf"]
    assert ship["scores"] == pytest.approx(by_cli["ship"]["scores"], abs=1e-9)  # every option, figure for figure
    assert ship["margin"] == by_cli["ship"]["margin"] and ship["signal"] == by_cli["ship"]["signal"]
    assert ship["features_version"] == by_cli["ship"]["features_version"]
    assert promoted["decision"] == by_cli["promotion"]["decision"] == "promoted"
    assert promoted["gate_set"] == by_cli["promotion"]["gate_set"] and promoted["gate_set"].endswith("(gate-slice)")
    assert promoted["challenger_ndcg"] == pytest.approx(by_cli["promotion"]["challenger_ndcg"], abs=1e-9)
    assert _version_tags(stage_env, promoted["version"]) == _version_tags(
        stage_env.with_overrides(mlflow_tracking_uri=by_cli["mlflow_tracking_uri"]), by_cli["promotion"]["version"])
    assert _without_run_ids(table["table_markdown"]) == _without_run_ids(by_cli["table_markdown"])  # the same rows
    assert promoted["served"] == by_cli["promotion"]["served"]  # the gate's served search, figure for figure
    # the same served-search rows (latency aside: it is measured on this machine, run by run)
    keys = ("name", "mode", "recall@10", "recall@100", "ndcg@10")
    assert [{k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys} for r in searched["rows"]] == [
        {k: r[k] for k in keys} for r in by_cli["served_search"]["rows"]]
    # the job's fusion row measures the weight the gate fitted and the index serves, not one of its own
    linear_weights = [r["linear_weight"] for r in searched["rows"] if r["kind"] == "model" and r["mode"] == "linear"]
    assert linear_weights == [promoted["served"]["challenger"]["linear_weight"]]


def _small_corpus(stage_env: Settings, small_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Both doors on the small data folder: the gate and the served-search stage encode its whole corpus."""
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(small_data_dir))
    return stage_env.with_overrides(data_dir=small_data_dir)


def _without_run_ids(text: str) -> str:
    """``text`` with MLflow run and model ids masked (each door has its own MLflow)."""
    return re.sub(r"\b(m-)?[0-9a-f]{32}\b", "<id>", text)


@pytest.mark.slow
def test_a_champion_from_one_door_is_challenged_fairly_by_the_other_and_staleness_is_told(
        dagbag: Any, stage_env: Settings, tiny_chain: TinyChain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from deepsent.cli import main

    stage_env = _small_corpus(copy_of(tiny_chain, stage_env), tiny_chain.settings.data_dir, monkeypatch)
    notifications = tmp_path / "notify.jsonl"
    monkeypatch.setenv("DEEPSENT_NOTIFY", f"file:{notifications}")
    by_cli = tiny_chain.result  # deepsent run of the tiny profile: its store and registry are this test's copy
    assert by_cli["promotion"]["decision"] == "promoted"
    champion = by_cli["promotion"]["version"]

    conf = retrain_conf(simulate_days=0, stale_after_refusals=1)
    dag_run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 2, 16, 3, tzinfo=timezone.utc),
                                                      run_conf=conf)
    assert dag_run.state == "success"
    ship, promoted = _xcom(dag_run.run_id, "ship"), _xcom(dag_run.run_id, "promote")
    # the DAG offers what deepsent run ships, gated like for like on the same gate set
    assert ship["name"] == by_cli["ship"]["name"] and promoted["challenger_uri"] == ship["model_uri"]
    assert promoted["champion_before"] == champion
    # the same data and seed train the same models: nothing better, so refused (or, when MiniLM off the shelf ships
    # again, the champion unchanged and the retrain counted as refused), and with a limit of 1 refusal, stale
    if ship["off_the_shelf"]:
        assert promoted["decision"] == "unchanged" and promoted["champion"] == champion
    else:
        assert promoted["decision"] == "refused" and promoted["challenger_ndcg"] == promoted["champion_ndcg"]
    assert promoted["stale"].startswith(f"deepsent-ranker version {champion} is stale: 1 retrained challengers refused")
    told = [json.loads(line) for line in notifications.read_text().splitlines()]
    assert told[-1]["event"] == "champion_stale" and told[-1]["airflow.dag_run_id"] == dag_run.run_id

    capsys.readouterr()  # what the runs printed
    assert main(["promote", "--status", "--json", "--store", stage_env.store]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["champion"] == promoted["champion"]
    assert [d["decision"] for d in status["decisions"][:2]] == [promoted["decision"], "promoted"]
    assert status["refusals_in_a_row"] == 1 and status["champion"] == champion
    assert status["decisions"][0]["dag_run_id"] == dag_run.run_id
    assert ("already is the champion" if ship["off_the_shelf"] else "not better") in status["decisions"][0]["reason"]
