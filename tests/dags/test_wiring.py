"""The retrain DAG and the in-process runner share their rules: one best-model pick, one device setting."""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from deepsent.runner import ModelSpec, best_trained
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.core.store import Store


def test_pick_best_task_and_runner_make_the_same_pick(dagbag: Any, make_train_result: Callable[..., TrainResult]) -> None:
    pick_best = dagbag.get_dag("deepsent_retrain").get_task("pick_best").python_callable
    trained = [make_train_result("a", 0.94, 0.40), make_train_result("b", 0.90, 0.10), make_train_result("c", 0.94, 0.30)]
    xcoms = [{k: v for k, v in r.to_dict().items() if k != "history"} for r in trained]  # as the train task pushes them
    from_runner = best_trained(trained, tuple(ModelSpec("lstm") for _ in trained))
    assert pick_best(xcoms)["name"] == from_runner.name == "c"


def test_stage_settings_take_the_device_param_over_the_environment(dagbag: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from _wiring import stage_settings

    monkeypatch.setenv("DEEPSENT_DEVICE", "cuda")
    assert stage_settings({"device": "cpu"}).device == "cpu"
    assert stage_settings({"device": None}).device == stage_settings().device == "cuda"


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the device through the error of a missing GPU")
def test_device_param_reaches_the_embed_task(dagbag: Any, trained_run: tuple[Settings, TrainResult],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A trigger with device=cpu embeds on the CPU even where the worker's DEEPSENT_DEVICE says cuda."""
    settings, trained = trained_run
    for name, value in (("DEEPSENT_STORE", settings.store), ("DEEPSENT_DATA_DIR", str(settings.data_dir)),
                        ("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri), ("DEEPSENT_DEVICE", "cuda")):
        monkeypatch.setenv(name, value)
    embed = dagbag.get_dag("deepsent_retrain").get_task("embed").python_callable
    embedded = embed({"model_uri": trained.model_uri}, params={"device": "cpu", "judgments": None})
    manifest = Store.from_settings(settings).read_json(Store.from_settings(settings).relpath(embedded["manifest"]))
    assert manifest["run_id"] == trained.run_id and manifest["device"].startswith("cpu")
