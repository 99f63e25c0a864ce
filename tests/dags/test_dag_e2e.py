"""End to end with ``dag.test()``: ingest two simulated days (the second announces enough new days
to retrain) and a day with only a catalogue (no new day of clicks); retrain two tiny models, compare,
gate the shipped model against the champion, and index the champion.

Real stages on a small slice of the real data: the simulator reads judgments_train.csv, the judged
set is the first 40 queries of judgments_dev.csv, MLflow is a SQLite store, Dask a local cluster.
The retrain is the suite's one DAG retrain (``tiny_dag_run``, tests/dags/conftest.py: on a copy of the store
``deepsent run`` left, challenging its champion), which tests/dags/test_two_doors.py reads too. The retrain's
index stage indexes the champion from the vectors stored before; the index DAG, triggered by hand with the
champion's URI (as after a promotion by hand), rebuilds the same bytes. A first promotion through the DAG, with its
champion event, is tests/dags/test_landing_doors.py's.
"""
from __future__ import annotations

import datetime as dt
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import Settings
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store

from tests.dags.conftest import TINY_DAG_GROUP, DagRun, asset_extras, stage_environment, xcoms
from tests.tiny_chain import TINY_CONF

DAYS = [dt.date(2026, 2, 2), dt.date(2026, 2, 3)]
MODELS, BASELINES = TINY_CONF["models"], TINY_CONF["baselines"]


def _midnight_after(day: dt.date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc) + timedelta(days=1)


def _queued_for(dag_id: str) -> set[str]:
    """Assets whose events wait to start a run of ``dag_id`` (the scheduler's asset-triggered run queue)."""
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetModel.name).join(AssetDagRunQueue, AssetDagRunQueue.asset_id == AssetModel.id)
        return set(session.scalars(query.where(AssetDagRunQueue.target_dag_id == dag_id)))


def _task_states(dag_run: Any) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: ti.state for ti in dag_run.get_task_instances(session=session)}


def _mlflow_runs_of(settings: Settings, dag_run_id: str) -> dict[str, dict[str, str]]:
    """MLflow runs (any experiment) tagged with ``dag_run_id``: run id -> tags."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(experiments, filter_string=f"tags.`airflow.dag_run_id` = '{dag_run_id}'")
    return {run.info.run_id: run.data.tags for run in found}


def test_ingest_announces_new_days_and_queues_a_retrain(dagbag: Any, stage_env: Settings, small_data_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    settings = stage_env.with_overrides(data_dir=small_data_dir)
    monkeypatch.setenv("DEEPSENT_DATA_DIR", str(small_data_dir))
    store = Store.from_settings(settings)
    simulate(settings, DAYS[0], days=len(DAYS), params=SimParams(searches_per_day=1500, users=3000))
    earlier = len(asset_extras("deepsent_new_clicks"))  # another test's runs in this worker's Airflow database

    announced = []
    for day in DAYS:  # one run per day: the data interval picks the partition
        ingest_run = dagbag.get_dag("deepsent_ingest").test(logical_date=_midnight_after(day))
        assert ingest_run.state == "success"
        assert store.list_files(f"clicks/dt={day.isoformat()}") == [f"clicks/dt={day.isoformat()}/part-0.parquet"]
        announced.append(_task_states(ingest_run)["announce_new_days"])
    assert [e["dt"] for e in asset_extras("deepsent_clicks")][-2:] == [d.isoformat() for d in DAYS]
    # DEEPSENT_RETRAIN_EVERY_DAYS=2 (conftest): the first day alone starts no retrain, the second does
    assert announced == ["skipped", "success"]
    assert asset_extras("deepsent_new_clicks")[earlier:] == [{"days": [d.isoformat() for d in DAYS]}]
    assert "deepsent_new_clicks" in _queued_for("deepsent_retrain")


def test_a_day_with_only_a_catalogue_is_ingested_and_is_no_new_day_of_clicks(dagbag: Any, stage_env: Settings) -> None:
    """The sensor takes the catalogue folder for the day; the catalogue is written and announced, no click event."""
    from pipeline.ingest.paths import catalog_landing_prefix, catalog_path

    day, store = dt.date(2026, 4, 6), Store.from_settings(stage_env)
    store.write_text(f"{catalog_landing_prefix(day)}/snapshot-0.csv", "product_id,title\np1,Red Shoes\np2,blue hat\n")
    clicks_before = asset_extras("deepsent_clicks")  # other tests' runs in this worker's Airflow database

    run = dagbag.get_dag("deepsent_ingest").test(logical_date=_midnight_after(day))
    assert run.state == "success"
    states = _task_states(run)
    assert (states["wait_for_landing"], states["ingest"]) == ("success", "success")
    assert store.read_table(catalog_path(day)).column("product_id").to_pylist() == ["p1", "p2"]
    assert not store.exists("clicks")  # the click table is left alone
    assert asset_extras("deepsent_catalog")[-1] == {"days": [day.isoformat()], "launches": 2, "edits": 0,
                                                     "retirements": 0}
    assert "deepsent_catalog" in _queued_for("deepsent_index")  # the champion's index follows the catalogue
    assert asset_extras("deepsent_clicks") == clicks_before  # no click event: not a new day of clicks
    assert states["announce_new_days"] == "skipped"


@pytest.mark.slow
@TINY_DAG_GROUP
def test_the_retrain_trains_compares_promotes_and_indexes_and_the_index_dag_rebuilds_it(
        dagbag: Any, tiny_dag_run: DagRun, monkeypatch: pytest.MonkeyPatch) -> None:
    run, settings = tiny_dag_run, tiny_dag_run.settings
    store = Store.from_settings(settings)
    assert run.state == "success"

    trained = xcoms(run.run_id, "train")
    assert sorted(r["model"] for r in trained.values()) == sorted(MODELS)
    tagged = _mlflow_runs_of(settings, run.run_id)
    train_run_ids = {r["run_id"] for r in trained.values()}
    assert train_run_ids <= set(tagged)  # every training run carries the DAG run id ...
    assert {tagged[r]["airflow.task_id"] for r in train_run_ids} == {"train"}
    assert {tagged[r]["airflow.map_index"] for r in train_run_ids} == {"0", "1"}

    report = xcoms(run.run_id, "compare")[-1]
    assert report["mlflow_run_id"] in tagged and tagged[report["mlflow_run_id"]]["airflow.task_id"] == "compare"
    ship = xcoms(run.run_id, "ship")[-1]
    # ... and nothing else ran under it but the ensemble, the comparison and the gate (below); MiniLM off the shelf,
    # when it ships, is the run deepsent run logged in this store before: not logged twice
    assert len(tagged) == len(MODELS) + 3
    names = [row["name"] for row in report["rows"]]
    assert len(names) == len(MODELS) + 1 + len(BASELINES)  # the trained models, the ensemble, the baselines
    assert report["queries"] <= 40  # the small data folder's judged set: the first 40 queries of the dev set

    table = store.read_text("reports/latest/table.md")
    assert table == report["table_markdown"]
    assert all(name in table for name in names)
    assert asset_extras("deepsent_report")[-1]["mlflow_run_id"] == report["mlflow_run_id"]
    # what deepsent run ships, by the same rule: a trained model only when it beats MiniLM on the gate set
    assert ship["off_the_shelf"] == (ship["margin"]["ci_low"] <= 0) and ship["signal"].startswith("gate set gate-slice")
    assert ship["name"] == "MiniLM-L6 off-the-shelf" if ship["off_the_shelf"] else ship["name"] == ship["challenger"]

    promoted = xcoms(run.run_id, "promote")[-1]
    assert promoted["decision"] in ("refused", "unchanged")  # deepsent run's champion: nothing better was trained
    assert tagged[promoted["mlflow_run_id"]]["airflow.task_id"] == "promote"  # the gate's run carries the DAG run
    champion = f"models:/deepsent-ranker/{promoted['champion']}"
    built = xcoms(run.run_id, "index")[-1]  # the chain's index stage indexed the champion
    manifest = store.read_json(store.relpath(built["manifest"]))
    assert manifest["count"] == built["count"] > 0 and manifest["version"] == built["version"] == promoted["champion"]
    assert built["model_uri"] == champion and built["encoded"] == 0  # the vectors stored before, read back
    assert asset_extras("deepsent_index")[-1]["version"] == built["version"]

    for name, value in stage_environment(settings).items():
        monkeypatch.setenv(name, value)
    index_run = dagbag.get_dag("deepsent_index").test(logical_date=datetime(2026, 2, 9, 4, tzinfo=timezone.utc),
                                                      run_conf={"model_uri": champion})
    assert index_run.state == "success"  # by hand: the champion's index built again as it was
    assert xcoms(index_run.run_id, "champion")[-1]["model_uri"] == champion
    again = xcoms(index_run.run_id, "build_index")[-1]
    assert again["encoded"] == 0 and again["version"] == built["version"]
    assert store.read_bytes(f"{store.relpath(again['build'])}/index.faiss") == store.read_bytes(
        f"{store.relpath(built['build'])}/index.faiss")
    assert asset_extras("deepsent_index")[-1]["version"] == built["version"]
