"""TaskFlow tasks generated from the chain's declaration (``deepsent.chain.CHAIN``): one per stage.

Each task rebuilds the run (:func:`_wiring.chain_run`: the worker's settings, the params' profile and
options, the DAG run's tags), rebuilds the results it needs from their XComs, runs the stage function
``deepsent run`` runs, logs its summary and returns its result as XCom. A stage's description is the
task's documentation; a training stage goes to the training queue and pool.
"""
from __future__ import annotations

from typing import Any, Callable

from _params import TRAIN_POOL, TRAIN_QUEUE
from airflow.sdk import get_current_context, task

from deepsent.chain import Stage

#: XCom keys left out of a result (per-epoch history, per-day counts): large and unused downstream.
DROPPED = ("history", "per_date")


def stage_task(declared: Stage, outlets: list[Any] | None = None,
               announce: Callable[[Any, dict[str, Any]], None] | None = None) -> Any:
    """The TaskFlow task of ``declared``; ``announce(result, context)`` emits its asset events."""

    def run_stage(inputs: dict[str, Any], point: dict[str, Any] | None = None, shard: dict[str, int] | None = None,
                  params: dict[str, Any] | None = None) -> dict[str, Any]:
        from _wiring import chain_run, log_mlflow_at_its_levels, log_result, xcom_value

        from deepsent.chain import decode, stage
        from deepsent.profiles import ModelSpec
        from pipeline.core.interrupt import sigterm_raises

        log_mlflow_at_its_levels()
        context = get_current_context()
        run = chain_run(params or {}, context)
        given = {name: decode(stage(name), value) for name, value in inputs.items()}
        if point is not None:
            given["point"] = ModelSpec(**point)
            context["grid_point"] = "-".join([point["model"], *map(str, point["tower"].values())])
        if shard is not None:
            given["shard"] = shard
        with sigterm_raises():  # Airflow stops a task with SIGTERM: an MLflow run it holds ends KILLED
            result = declared.function()(run, **given)
        log_result(declared.name, result)
        if getattr(result, "run_id", None) and declared.mapped:
            print(f"MLflow run id: {result.run_id} ({result.model_uri})")
        if announce is not None:
            announce(result, context)
        return xcom_value(result, drop=DROPPED)

    run_stage.__name__ = declared.name
    run_stage.__doc__ = declared.doc
    options: dict[str, Any] = {"task_id": declared.name, "doc_md": declared.doc, "outlets": outlets or []}
    if declared.training:
        options.update(queue=TRAIN_QUEUE, pool=TRAIN_POOL)
    if declared.mapped:
        options["map_index_template"] = "{{ grid_point }}"
    if declared.retries is not None:
        options["retries"] = declared.retries
    return task(**options)(run_stage)


@task
def corpus_shards(params: dict[str, Any] | None = None) -> list[dict[str, int]]:
    """The corpus's shards (``{"shard": i, "of": n}``), one encode task each: their count depends on the titles only."""
    from _wiring import stage_settings

    from encoders.search.corpus_shards import corpus_texts, shard_count
    from pipeline.core.store import Store

    settings = stage_settings(params)
    count = shard_count(len(corpus_texts(settings, Store.from_settings(settings))))
    return [{"shard": i, "of": count} for i in range(count)]
