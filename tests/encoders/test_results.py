"""Typed stage results: JSON round trips (``--json``, XCom)."""
from __future__ import annotations

import json
from typing import Callable

from encoders.results import TrainResult


def test_train_result_survives_json_and_xcom(make_train_result: Callable[..., TrainResult]) -> None:
    result = make_train_result("a", 0.9, 0.3)
    plain = result.to_dict()
    assert json.loads(json.dumps(plain)) == plain and plain["model_uri"] == "runs:/run-a/model"
    assert TrainResult.from_dict(plain) == result
    without_history = {k: v for k, v in plain.items() if k != "history"}  # what the DAG's train task pushes
    assert TrainResult.from_dict(without_history).history == []

