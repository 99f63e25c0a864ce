"""deepsent_retrain: the chain of ``deepsent run`` as a DAG, one task per stage of ``deepsent.chain.CHAIN``.

simulate (nothing unless ``simulate_days``) -> ingest -> pairs -> mine (nothing unless the grid mines its
negatives) -> featurize -> train (one mapped task per grid point) -> ensemble -> ship -> encode (one mapped task per corpus shard) -> promote -> index -> search -> compare -> publish: the same stage functions on the same inputs as ``deepsent run``, so
both front doors ship by one rule (on the decision set, the ``gate_judgments`` param or DEEPSENT_GATE_JUDGMENTS: a
trained model only when it beats MiniLM off the shelf by more than the noise, then the gate on the same set). Runs weekly (``DEEPSENT_RETRAIN_CRON``, Monday 03:00 UTC) and whenever
``DEEPSENT_RETRAIN_EVERY_DAYS`` (default 7) new days of clicks have landed since the last retrain (asset
``deepsent_new_clicks``, emitted by deepsent_ingest), whichever comes first. The ``profile`` param is
``deepsent run``'s (``quick`` by default, ``full`` for the Table IV grid); the other training params,
when set, override its grid. Every MLflow run is tagged with this DAG run's id (``airflow.dag_run_id``).
The table is published to ``reports/latest/`` (asset ``deepsent_report``); a promotion updates asset
``deepsent_champion``; the index stage leaves the champion indexed for ``deepsent search`` (asset ``deepsent_index``); a champion refused
``stale_after_refusals`` times in a row, or older than ``stale_after_days``, is notified
(``DEEPSENT_NOTIFY``). Training tasks go to ``DEEPSENT_TRAIN_QUEUE``/``DEEPSENT_TRAIN_POOL``. A conf key
that is not a param fails the first task at once, naming it and the known ones.
"""
from __future__ import annotations

from typing import Any

from _assets import CHAMPION, CHAMPION_ALIAS, INDEX, REPORT, announce_index, retrain_schedule
from _chain_tasks import chain_tasks
from _params import DEFAULT_ARGS, START_DATE, retrain_params
from airflow.sdk import dag, task

from deepsent.chain import CHAIN


def _announce_report(result: Any, context: dict[str, Any]) -> None:
    """The published table's comparison, as the extra of the ``deepsent_report`` event."""
    context["outlet_events"][REPORT].extra = {"report_name": result.report_name, "mlflow_run_id": result.mlflow_run_id}



def _announce_champion(result: Any, context: dict[str, Any]) -> None:
    """A promotion (only) updates ``deepsent_champion``."""
    if result.decision == "promoted":
        context["outlet_events"][CHAMPION_ALIAS].add(CHAMPION, extra={
            "model_uri": result.model_uri, "version": result.version, "challenger_uri": result.challenger_uri,
            "dag_run_id": context["ti"].run_id})


#: The datasets whose writes are announced: their outlet (from the dataset's record) and what emits the event.
EVENTS = {"latest": (REPORT, _announce_report), "champion": (CHAMPION_ALIAS, _announce_champion),
          "index": (INDEX, announce_index)}


@dag(
    dag_id="deepsent_retrain",
    schedule=retrain_schedule(),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=retrain_params(),
    tags=["deepsent"],
    doc_md=__doc__,
)
def deepsent_retrain() -> None:
    """The chain's stages as tasks (``_chain_tasks.chain_tasks``), after a check of the params."""

    @task(retries=0)
    def check_params(params: dict[str, Any] | None = None, dag_run: Any = None) -> None:
        """Checks a JSON schema cannot express (unknown conf keys, the profile's overrides); a bad trigger fails here."""
        from _params import retrain_param_errors, unknown_param_errors
        from airflow.sdk.exceptions import AirflowFailException

        errors = unknown_param_errors(dag_run.conf, retrain_params()) + retrain_param_errors(params or {})
        if errors:
            raise AirflowFailException("bad params: " + "; ".join(errors))

    @task
    def grid(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The grid points of the params' profile (its overrides applied): one training task each."""
        from deepsent.profiles import resolve_profile

        return [spec.to_dict() for spec in resolve_profile(params or {}).models]

    chain_tasks(CHAIN, check_params(), grid, EVENTS)

deepsent_retrain()
