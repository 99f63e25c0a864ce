"""The retrain DAG is the chain: its tasks are the declared stages, and the device param reaches every stage."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from deepsent.chain_results import ChainRun, Ingested, Landing, Published  # the toy stages' annotations name them
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from tests.conftest import private_copy


def test_the_dag_is_the_chain(dagbag: Any) -> None:
    """One task per declared stage, in the declared order of dependencies, documented by the stage."""
    from deepsent.chain import CHAIN

    dag = dagbag.get_dag("deepsent_retrain")
    helpers = ("check_params", "grid", "corpus_shards")  # a mapped stage's list of grid points or corpus shards
    assert [t.task_id for t in dag.tasks if t.task_id not in helpers] == [s.name for s in CHAIN]
    for declared in CHAIN:
        task = dag.get_task(declared.name)
        assert task.doc_md == declared.doc
        assert set(task.upstream_task_ids) - set(helpers) == set(declared.needs), declared.name
    assert dag.get_task("train").upstream_task_ids >= {"grid", "featurize"}
    assert dag.get_task("encode").upstream_task_ids == {"corpus_shards", "ship"} and dag.get_task("encode").queue


def test_every_stage_takes_results_of_its_needs_and_returns_a_stage_result() -> None:
    """A stage's parameters are the run, the results it takes (stages it waits for), and a grid point or a corpus
    shard; its return annotation is a StageResult (rebuilt from its XCom), not Any."""
    import inspect

    from deepsent.chain import CHAIN, ChainError, inputs_of

    for declared in CHAIN:
        names = list(inspect.signature(declared.function).parameters)
        assert names == ["run", *declared.takes, *(["point"] if declared.mapped else []),
                         *(["shard"] if declared.sharded else [])], declared.name
        assert set(declared.takes) <= set(declared.needs), declared.name
        assert declared.result_type().from_dict  # a StageResult: rebuilt from its XCom
    with pytest.raises(ChainError, match="stage 'ship' needs the result of 'ensemble'"):
        inputs_of(next(s for s in CHAIN if s.name == "ship"), {"featurize": 1, "train": []})


def _serialized(dag: Any) -> None:
    """``dag`` written to this worker's Airflow database, as the DAG processor writes a parsed file's DAGs (``dag.test()``
    runs only a serialized DAG, and this one lives in no file of the bundle)."""
    from types import SimpleNamespace

    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()  # the bundle it is filed under
    sync_bag_to_db(SimpleNamespace(dags={dag.dag_id: dag}, import_errors={}, bundle_path=None, dag_warnings=set(),
                                   file_last_changed={}), "dags-folder", None)


def _toy_chain(log: Path) -> tuple[Any, ...]:
    """Three stages declared out of order, the last a stage added with one function and one declaration: it reads the
    clicks the second writes, and takes no result, so only the datasets order it."""
    from deepsent.chain import Stage, build_chain

    def landed(run: ChainRun) -> Landing:
        with log.open("a") as out:
            out.write("landed\n")
        return Landing(dates=["2026-01-01"], lines=3, partitions=[], summary="3 lines landed")

    def counted(run: ChainRun, landed: Landing) -> Ingested:
        with log.open("a") as out:
            out.write(f"counted {landed.lines}\n")
        return Ingested(dates=landed.dates, counts={"kept": landed.lines}, summary="3 kept")

    def noted(run: ChainRun) -> Published:
        with log.open("a") as out:
            out.write("noted\n")
        return Published(published={}, report_name="toy", mlflow_run_id="", summary="noted")

    return build_chain((Stage(noted, "The added stage.", reads=("clicks",), writes=("latest",)),
                        Stage(counted, "Counts.", reads=("landing",), writes=("clicks",)),
                        Stage(landed, "Lands.", writes=("landing",))), complete=False)


def test_a_stage_added_by_one_function_and_one_declaration_runs_in_order_through_both_doors(
        dagbag: Any, settings: Settings, tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from _chain_tasks import chain_tasks
    from _params import retrain_params
    from airflow.sdk import DAG, task

    from deepsent.profiles import resolve_profile
    from deepsent.runner import execute

    by_runner, by_dag = tmp_path / "runner.log", tmp_path / "dag.log"
    toy = _toy_chain(by_runner)
    assert [(s.name, s.needs) for s in toy] == [("landed", ()), ("counted", ("landed",)), ("noted", ("counted",))]
    results, _ = execute(ChainRun(settings=settings, profile=resolve_profile({})), toy)
    assert by_runner.read_text().split("\n") == ["landed", "counted 3", "noted", ""] and results["noted"].summary == "noted"

    toy = _toy_chain(by_dag)
    with DAG("deepsent_toy_chain", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
             params=retrain_params()) as dag:
        @task
        def start() -> None:
            """The first task, as the retrain's check of its params."""

        chain_tasks(toy, start(), grid=lambda: None, events={})
    assert dag.get_task("noted").upstream_task_ids == {"counted"}  # the added stage: after the writer of what it reads
    _serialized(dag)
    run = dag.test(logical_date=datetime(2026, 1, 2, tzinfo=timezone.utc))
    assert run.state == "success" and by_dag.read_text().split("\n") == ["landed", "counted 3", "noted", ""]


def test_stage_settings_take_the_device_param_over_the_environment(dagbag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from _wiring import stage_settings

    monkeypatch.setenv("DEEPSENT_DEVICE", "cuda")
    assert stage_settings({"device": "cpu"}).device == "cpu"
    assert stage_settings({"device": None}).device == stage_settings().device == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the device through the error of a missing GPU")
def test_device_param_reaches_the_stages(dagbag: Any, trained_run: tuple[Settings, TrainResult], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A trigger with device=cpu embeds on the CPU even where the worker's DEEPSENT_DEVICE says cuda."""
    settings, trained = private_copy(trained_run[0], tmp_path), trained_run[1]  # its own vector store
    for name, value in (("DEEPSENT_STORE", settings.store), ("DEEPSENT_DATA_DIR", str(settings.data_dir)),
                        ("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri), ("DEEPSENT_DEVICE", "cuda")):
        monkeypatch.setenv(name, value)
    from _wiring import chain_run

    from deepsent.profiles import DEFAULT_PROFILE
    from encoders.search.embed import embed

    context = {"ti": type("TI", (), {"try_number": 1, "run_id": "manual__1", "dag_id": "deepsent_retrain",
                                     "task_id": "index", "map_index": -1})()}
    params = {"profile": DEFAULT_PROFILE, "device": "cpu", "seed": 7, "stale_after_refusals": 3, "stale_after_days": 30}
    run = chain_run({**params, "models": [trained.model]}, context)  # a grid of the one trained model
    assert run.settings.device == "cpu" and run.tags["airflow.dag_run_id"] == "manual__1"
    embedded = embed(run.settings, trained.model_uri, tmp_path / "exported")  # what a stage's settings encode on
    manifest = json.loads(Path(embedded.manifest).read_text())
    assert manifest["run_id"] == trained.run_id and manifest["device"].startswith("cpu")
