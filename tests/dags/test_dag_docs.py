"""What the UI shows: every task and every param of every DAG has a description, and no choice reads "null".

Read from the serialized DAGs, as the API server and the UI read them.
"""
from __future__ import annotations

from typing import Any

import pytest


def _serialized_dags(dagbag: Any) -> list[Any]:
    from airflow.serialization.serialized_objects import DagSerialization

    return [DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)) for dag in dagbag.dags.values()]


def _ui_label(value: Any, values_display: dict[str, str] | None) -> str:
    """The label the trigger form shows for one enum choice (airflow/ui: values_display, else the text of the value)."""
    text = "null" if value is None else str(value)
    return (values_display or {}).get(text) or (values_display or {}).get("None") or text


def test_every_task_has_a_description(dagbag: Any) -> None:
    missing = [f"{dag.dag_id}.{task.task_id}" for dag in _serialized_dags(dagbag) for task in dag.tasks
               if not (task.doc_md or "").strip()]
    assert missing == []


def test_every_param_has_a_title_and_a_description_and_no_null_choice(dagbag: Any) -> None:
    problems = []
    for dag in _serialized_dags(dagbag):
        assert dag.params, dag.dag_id
        for name in dag.params:
            param = dag.params.get_param(name)
            where = f"{dag.dag_id}.{name}"
            if not (param.description or "").strip() or param.description.strip() == "null":
                problems.append(f"{where}: no description")
            if not (param.schema.get("title") or "").strip():
                problems.append(f"{where}: no title")
            labels = [_ui_label(v, param.schema.get("values_display")) for v in param.schema.get("enum") or []]
            problems += [f"{where}: a choice reads {label!r}" for label in labels if label in ("null", "None", "")]
    assert problems == []


@pytest.mark.parametrize("values_display", [None, {"cpu": "CPU"}])
def test_the_null_check_can_fail(values_display: dict[str, str] | None) -> None:
    """The label rule above does flag a nullable enum without a display text for its empty choice."""
    assert _ui_label(None, values_display) == "null"
