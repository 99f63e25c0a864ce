"""The retrain DAG is the chain: its tasks are the declared stages, and the device param reaches every stage."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

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


def test_every_stage_takes_what_it_declares() -> None:
    """The declaration and the stage functions agree: a stage's parameters are the run, its needs (and a grid point
    or a corpus shard)."""
    import inspect

    from deepsent.chain import CHAIN, ChainError, inputs_of

    for declared in CHAIN:
        names = list(inspect.signature(declared.function()).parameters)
        assert names == ["run", *declared.needs, *(["point"] if declared.mapped else []),
                         *(["shard"] if declared.sharded else [])], declared.name
        assert declared.result_type().from_dict  # a StageResult: rebuilt from its XCom
        returned = inspect.signature(declared.function()).return_annotation  # a string: annotations are postponed
        assert returned == declared.returns.split(":")[1], (declared.name, returned)  # its declared type, not Any
    with pytest.raises(ChainError, match="stage 'ship' needs the result of 'ensemble'"):
        inputs_of(next(s for s in CHAIN if s.name == "ship"), {"featurize": 1, "train": []})


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
