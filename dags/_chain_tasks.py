"""TaskFlow tasks generated from the chain's declaration (``deepsent.chain.CHAIN``): one per stage.

Each task rebuilds the run (:func:`_wiring.chain_run`: the worker's settings, the params' profile and
options, the DAG run's tags), rebuilds the results it takes from their XComs, runs the stage function
``deepsent run`` runs, logs its summary and returns its result as XCom. A stage's description is the
task's documentation; a training stage goes to the training queue and pool. :func:`chain_tasks` lays a whole
chain out in a DAG, each task after the stages it needs (as :func:`deepsent.chain.build_chain` derived them).
"""
from __future__ import annotations

from typing import Any, Callable

from _params import TRAIN_POOL, TRAIN_QUEUE
from airflow.sdk import get_current_context, task

from deepsent.chain import Stage

#: XCom keys left out of a result (per-epoch history, per-day counts): large and unused downstream.
DROPPED = ("history", "per_date")


#: Emits a stage's asset events from its result and the task's context.
Announce = Callable[[Any, dict[str, Any]], None]


def stage_task(declared: Stage, outlets: list[Any] | None = None, announce: Announce | None = None) -> Any:
    """The TaskFlow task of ``declared``; ``announce(result, context)`` emits its asset events."""

    def run_stage(inputs: dict[str, Any], point: dict[str, Any] | None = None, shard: dict[str, int] | None = None,
                  params: dict[str, Any] | None = None) -> dict[str, Any]:
        from _wiring import chain_run, log_mlflow_at_its_levels, log_result, xcom_value

        from deepsent.chain import decode, running
        from deepsent.profiles import ModelSpec
        from pipeline.runtime.interrupt import sigterm_raises

        log_mlflow_at_its_levels()
        context = get_current_context()
        run = chain_run(params or {}, context)
        given = {name: decode(declared, name, value) for name, value in inputs.items()}
        if point is not None:
            given["point"] = ModelSpec(**point)
            context["grid_point"] = "-".join([point["model"], *map(str, point["tower"].values())])
        if shard is not None:
            given["shard"] = shard
        with sigterm_raises():  # Airflow stops a task with SIGTERM: an MLflow run it holds ends KILLED
            result = running(declared, run, **given)
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
    from pipeline.storage.store import Store

    settings = stage_settings(params)
    count = shard_count(len(corpus_texts(settings, Store.from_settings(settings))))
    return [{"shard": i, "of": count} for i in range(count)]


def chain_tasks(chain: tuple[Stage, ...], first: Any, grid: Callable[[], Any] | None,
                events: dict[str, tuple[Any, Announce]], given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every stage of ``chain`` as a task of the DAG being defined, after ``first`` (the params' check), each after the
    stages it needs; ``grid()`` makes the task listing a mapped stage's grid points; ``events``: for a dataset
    announced by an asset, the outlet and the function that emits its event; ``given``: results made by tasks outside
    the chain (the index DAG's champion), by name. The tasks' results, by stage name."""
    results: dict[str, Any] = dict(given or {})
    for declared in chain:
        announced = [events[name] for name in declared.writes if name in events]
        run_stage = stage_task(declared, [outlet for outlet, _ in announced],
                               _announce_all([announce for _, announce in announced]))
        inputs = {name: results[name] for name in declared.takes}
        if declared.mapped:
            points = grid()
            first >> points
            results[declared.name] = run_stage.partial(inputs=inputs).expand(point=points)
        elif declared.sharded:
            shards = corpus_shards()
            for need in dict.fromkeys(declared.needs + declared.takes):
                results[need] >> shards
            results[declared.name] = run_stage.partial(inputs=inputs).expand(shard=shards)
        else:
            results[declared.name] = run_stage(inputs=inputs)
        for need in declared.needs:  # the waits no result carries (the datasets it reads)
            results[need] >> results[declared.name]
        if not declared.needs:
            first >> results[declared.name]
    return results


def _announce_all(announces: list[Announce]) -> Announce | None:
    """One announce that runs each of ``announces`` (None when there are none)."""
    if not announces:
        return None

    def announce(result: Any, context: dict[str, Any]) -> None:
        for each in announces:
            each(result, context)
    return announce
