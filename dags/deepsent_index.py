"""deepsent_index: the champion's corpus -> vectors -> a FAISS index that ``deepsent search`` reads.

Runs whenever a retrain promotes a model (asset ``deepsent_champion``), or by hand. The model is the
``model_uri`` param, else the one named by the latest ``deepsent_champion`` event (the current
champion, pinned to its registry version). ``embed`` re-embeds every title of the corpus (new click
pairs bring new titles) with ``encoders.search.embed``; ``build_index`` writes ``indexes/<model>/<version>/``
with ``encoders.search.corpus_index`` (and the search mode measured best on held-out clicks, the one
``deepsent search`` serves) and updates asset ``deepsent_index``. Both overwrite their outputs, so a retry
or a re-run never duplicates. A conf key that is not a param fails the first task at once.
"""
from __future__ import annotations

from typing import Any

from _assets import CHAMPION, INDEX
from _params import DEFAULT_ARGS, START_DATE, index_params
from airflow.sdk import dag, task


@dag(
    dag_id="deepsent_index",
    schedule=CHAMPION,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=index_params(),
    tags=["deepsent"],
    doc_md=__doc__,
)
def deepsent_index() -> None:
    """Resolve the champion, embed the corpus with it, index the title vectors."""

    @task(inlets=[CHAMPION])
    def champion(params: dict[str, Any] | None = None, dag_run: Any = None, inlet_events: Any = None) -> str:
        """The model to index: the ``model_uri`` param, else the latest deepsent_champion event's; fails at once if neither."""
        from _params import unknown_param_errors
        from airflow.sdk.exceptions import AirflowFailException

        if errors := unknown_param_errors(dag_run.conf, index_params()):
            raise AirflowFailException("bad params: " + "; ".join(errors))
        if params["model_uri"]:
            return params["model_uri"]
        latest = next(iter(inlet_events[CHAMPION].ascending(False).limit(1)), None)
        if latest is None or not (latest.extra or {}).get("model_uri"):
            raise AirflowFailException("no champion promoted yet (no deepsent_champion event with a model_uri): "
                                       "run deepsent_retrain, or trigger with model_uri")
        return latest.extra["model_uri"]

    @task
    def embed(model_uri: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Embed every corpus title (and the dev queries) with the champion: embeddings/<model>-<run>/."""
        from _wiring import log_mlflow_at_its_levels, log_result, stage_settings, xcom_value

        from encoders.search.embed import embed as embed_stage

        log_mlflow_at_its_levels()
        result = embed_stage(stage_settings(params), model_uri)
        log_result("embed", result)
        return {"model_uri": model_uri, **xcom_value(result)}

    @task(outlets=[INDEX])
    def build_index(embedded: dict[str, Any], params: dict[str, Any] | None = None,
                    outlet_events: Any = None) -> dict[str, Any]:
        """Index the champion's title vectors (exact up to 200,000 titles, IVF above): indexes/<model>/<version>/."""
        from _wiring import log_mlflow_at_its_levels, log_result, stage_settings, xcom_value

        from encoders.search.corpus_index import build_index as build_index_stage

        log_mlflow_at_its_levels()
        result = build_index_stage(stage_settings(params), embedded["model_uri"], seed=params["seed"])
        log_result("index", result)
        outlet_events[INDEX].extra = {"model_uri": embedded["model_uri"], "root": str(result["root"]),
                                      **{k: result[k] for k in ("version", "run_id", "count", "index_type")}}
        return xcom_value(result)

    build_index(embed(champion()))


deepsent_index()
