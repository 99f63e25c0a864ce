"""deepsent_index: a champion promoted by hand (``deepsent promote``) -> the FAISS and BM25 index ``deepsent search`` reads.

deepsent_retrain ends in its own ``index`` stage, so a scheduled retrain leaves its champion indexed; this DAG is
triggered by hand, and by every ``deepsent_catalog`` update (a day's catalogue ingested by ``deepsent_ingest``):
then it refreshes the champion's index to the latest catalogue, encoding only the new and retitled titles and
dropping the retired ones, with no training (skipped while no champion is promoted yet). The model is the ``model_uri`` param, else the one named by the latest ``deepsent_champion``
event (the current champion, pinned to its registry version). Its stages are ``deepsent.chain.INDEX_CHAIN``, run
through the retrain's stage wrapper (``_chain_tasks``): ``encode`` (one mapped task per corpus shard, on the
training queue) stores the vectors of the titles no stage encoded yet, as the chain's encode stage does;
``build_index`` runs the index stage's build (``encoders.search.served_index.ServedIndex.build``): every corpus title's vector, read from the store's vectors (only
titles no stage encoded yet are encoded), into a new build of ``indexes/<model>/<version>/`` switched in
atomically, with the search mode measured best on held-out clicks (the one ``deepsent search`` serves); it
updates asset ``deepsent_index``. A rebuild gives the same bytes, so a retry or a re-run never duplicates. A conf
key that is not a param fails the first task at once.
"""
from __future__ import annotations

from typing import Any

from _assets import CATALOG, CHAMPION, INDEX, announce_index
from _chain_tasks import chain_tasks
from _params import DEFAULT_ARGS, START_DATE, index_params
from airflow.sdk import dag, task

from deepsent.chain import INDEX_CHAIN



@dag(
    dag_id="deepsent_index",
    schedule=CATALOG,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=index_params(),
    tags=["deepsent"],
    doc_md=__doc__,
)
def deepsent_index() -> None:
    """Resolve the champion, then the index chain's stages (``deepsent.chain.INDEX_CHAIN``) through the retrain's
    stage wrapper: encode the corpus titles its stored vectors lack (one task per shard), index them."""

    @task(inlets=[CHAMPION])
    def champion(params: dict[str, Any] | None = None, dag_run: Any = None, inlet_events: Any = None) -> dict[str, Any]:
        """The model to index: the ``model_uri`` param, else the latest deepsent_champion event's; fails at once if neither."""
        from _params import unknown_param_errors
        from airflow.sdk.exceptions import AirflowFailException

        if errors := unknown_param_errors(dag_run.conf, index_params()):
            raise AirflowFailException("bad params: " + "; ".join(errors))
        from deepsent.chain_results import Champion

        if params["model_uri"]:
            return Champion(params["model_uri"], summary="the model_uri param").to_dict()
        latest = next(iter(inlet_events[CHAMPION].ascending(False).limit(1)), None)
        if latest is None or not (latest.extra or {}).get("model_uri"):
            why = "no champion promoted yet (no deepsent_champion event with a model_uri)"
            if str(dag_run.run_type) == "asset_triggered":
                from airflow.sdk.exceptions import AirflowSkipException

                raise AirflowSkipException(f"{why}: the catalogue changed, but there is no index to refresh")
            raise AirflowFailException(f"{why}: run deepsent_retrain, or trigger with model_uri")
        return Champion(latest.extra["model_uri"], summary="the latest deepsent_champion event's").to_dict()

    chain_tasks(INDEX_CHAIN, first=(model := champion()), grid=None, given={"champion": model},
                events={"index": (INDEX, announce_index)})

deepsent_index()
