"""Typed stage results: JSON round trips (``--json``, XCom) and the one rule that picks the best model."""
from __future__ import annotations

import json
from typing import Callable

import pytest

from encoders.training.results import TrainResult, select_best


def test_train_result_survives_json_and_xcom(make_train_result: Callable[..., TrainResult]) -> None:
    result = make_train_result("a", 0.9, 0.3)
    plain = result.to_dict()
    assert json.loads(json.dumps(plain)) == plain and plain["model_uri"] == "runs:/run-a/model"
    assert TrainResult.from_dict(plain) == result
    without_history = {k: v for k, v in plain.items() if k != "history"}  # what the DAG's train task pushes
    assert TrainResult.from_dict(without_history).history == []


def test_best_model_has_the_highest_valid_mrr_then_the_lowest_loss(make_train_result: Callable[..., TrainResult]) -> None:
    runs = [make_train_result("a", 0.90, 0.30), make_train_result("b", 0.95, 0.40), make_train_result("c", 0.95, 0.35)]
    assert select_best(runs).name == "c"
    assert select_best(runs[:2]).name == "b"
    with pytest.raises(ValueError, match="no trained model"):
        select_best([])
