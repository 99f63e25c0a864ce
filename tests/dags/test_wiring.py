"""The retrain DAG and the in-process runner share their rules: one best-model pick."""
from __future__ import annotations

from typing import Any, Callable

from deepsent.runner import ModelSpec, best_trained
from encoders.results import TrainResult


def test_pick_best_task_and_runner_make_the_same_pick(dagbag: Any, make_train_result: Callable[..., TrainResult]) -> None:
    pick_best = dagbag.get_dag("deepsent_retrain").get_task("pick_best").python_callable
    trained = [make_train_result("a", 0.94, 0.40), make_train_result("b", 0.90, 0.10), make_train_result("c", 0.94, 0.30)]
    xcoms = [{k: v for k, v in r.to_dict().items() if k != "history"} for r in trained]  # as the train task pushes them
    from_runner = best_trained(trained, tuple(ModelSpec("lstm") for _ in trained))
    assert pick_best(xcoms)["name"] == from_runner.name == "c"
