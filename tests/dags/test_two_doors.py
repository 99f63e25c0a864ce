"""One chain, two front doors: the retrain DAG (``dag.test()``) and ``deepsent run`` ship the same model by one rule.

The suite builds one chain per door: ``deepsent run`` of the tiny profile in a fresh store (``tiny_chain``), and the
retrain DAG of the same params on a copy of that store (``tiny_dag_run``: the same landed days, the same seed), which
challenges the champion ``deepsent run`` promoted. The same model ships with the same gate-set figures, the gate (on
the gate slice) measures the challenger as it measured it for ``deepsent run``, and the tables have the same rows;
nothing better was trained, so the DAG's challenger is refused (or, when MiniLM off the shelf ships again, the
champion is unchanged), and with a limit of one refusal the champion is reported stale through the failure
notification and by ``deepsent promote --status``. (A first promotion through the DAG, with its champion event, is
tests/dags/test_landing_doors.py's.)
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.dags.conftest import TINY_DAG_GROUP, DagRun, xcoms
from tests.tiny_chain import TinyChain


def _xcom(run_id: str, task_id: str) -> Any:
    """The (unmapped) task's return value."""
    return list(xcoms(run_id, task_id).values())[-1]


def _without_run_ids(text: str) -> str:
    """``text`` with MLflow run and model ids masked (each door logs runs of its own)."""
    return re.sub(r"\b(m-)?[0-9a-f]{32}\b", "<id>", text)


@pytest.mark.slow
@TINY_DAG_GROUP
def test_the_dag_and_deepsent_run_ship_the_same_model(tiny_dag_run: DagRun, tiny_chain: TinyChain) -> None:
    by_cli = tiny_chain.result  # deepsent run of the same profile on the same data and seed
    dag_run = tiny_dag_run  # the DAG's run of it, on a copy of deepsent run's store
    assert dag_run.state == "success" and dag_run.settings.data_dir == tiny_chain.settings.data_dir
    ship, promoted, table, searched = (_xcom(dag_run.run_id, t) for t in ("ship", "promote", "compare", "search"))

    assert ship["name"] == by_cli["ship"]["name"] and ship["off_the_shelf"] == by_cli["ship"]["off_the_shelf"]
    assert ship["scores"] == pytest.approx(by_cli["ship"]["scores"], abs=1e-9)  # every option, figure for figure
    assert ship["margin"] == by_cli["ship"]["margin"] and ship["signal"] == by_cli["ship"]["signal"]
    assert ship["features_version"] == by_cli["ship"]["features_version"]
    assert by_cli["promotion"]["decision"] == "promoted"  # the first model offered to deepsent run's registry
    assert promoted["gate_set"] == by_cli["promotion"]["gate_set"] and promoted["gate_set"].endswith("(gate-slice)")
    if promoted["decision"] == "unchanged":  # MiniLM off the shelf shipped again: the champion already, nothing gated
        assert ship["off_the_shelf"] and promoted["champion"] == by_cli["promotion"]["version"]
    else:  # the gate measured the DAG's challenger as it measured deepsent run's: the same model, figure for figure
        assert promoted["challenger_ndcg"] == pytest.approx(by_cli["promotion"]["challenger_ndcg"], abs=1e-9)
        assert promoted["served"]["challenger"] == by_cli["promotion"]["served"]["challenger"]  # its served search too
    # (both doors' gates on fresh registries, figure for figure and tag for tag: tests/dags/test_landing_doors.py)
    assert _without_run_ids(table["table_markdown"]) == _without_run_ids(by_cli["table_markdown"])  # the same rows
    # the same served-search rows (latency aside: it is measured on this machine, run by run): the same champion
    keys = ("name", "mode", "recall@10", "recall@100", "ndcg@10")
    assert [{k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys} for r in searched["rows"]] == [
        {k: r[k] for k in keys} for r in by_cli["served_search"]["rows"]]
    # the job's fusion row measures the weight the gate fitted for the champion and its index serves, not one of its own
    linear_weights = [r["linear_weight"] for r in searched["rows"] if r["kind"] == "model" and r["mode"] == "linear"]
    assert linear_weights == [by_cli["promotion"]["served"]["challenger"]["linear_weight"]]


@pytest.mark.slow
@TINY_DAG_GROUP
def test_a_champion_from_one_door_is_challenged_fairly_by_the_other_and_staleness_is_told(
        tiny_dag_run: DagRun, tiny_chain: TinyChain, capsys: pytest.CaptureFixture[str]) -> None:
    from deepsent.cli import main

    by_cli, dag_run = tiny_chain.result, tiny_dag_run
    champion = by_cli["promotion"]["version"]
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
    told = [json.loads(line) for line in dag_run.notifications.read_text().splitlines()]
    assert told[-1]["event"] == "champion_stale" and told[-1]["airflow.dag_run_id"] == dag_run.run_id

    capsys.readouterr()  # what the runs printed
    assert main(["promote", "--status", "--json", "--store", dag_run.settings.store]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["champion"] == promoted["champion"]
    assert [d["decision"] for d in status["decisions"][:2]] == [promoted["decision"], "promoted"]
    assert status["refusals_in_a_row"] == 1 and status["champion"] == champion
    assert status["decisions"][0]["dag_run_id"] == dag_run.run_id
    assert ("already is the champion" if ship["off_the_shelf"] else "not better") in status["decisions"][0]["reason"]
