"""deepsent_ingest: one run per day ingests that day's landing partitions into the click table and the catalogue.

The day is the start of the run's data interval (``@daily``: the run for logical date D ingests
``landing/clicks/dt=D/`` and ``landing/catalog/dt=D/``); a manual run ingests the last complete day, or the ``day``
param. Catch-up over a range: ``airflow backfill create --dag-id deepsent_ingest --from-date A --to-date B``.
The sensor is done when either folder of the day exists; the same ``ingest_dates`` as ``deepsent ingest --date D``
then ingests the day's catalogue first (``catalog/dt=D/``; a click on a product not live that day is quarantined),
then its clicks, if any: a day with a catalogue and no clicks is ingested here too. Clicks that land after the run
has started are ingested by re-running the day. A run whose day had catalogue files updates ``deepsent_catalog``,
which schedules ``deepsent_index``: the champion's index follows the catalogue with no training.
Re-running a day replaces its partitions (same bytes, no duplicates). A run whose day had click files updates the
``deepsent_clicks`` asset (its extra names the day; a catalogue-only day does not, so it is no new day of clicks);
once ``DEEPSENT_RETRAIN_EVERY_DAYS`` (default 7) distinct days of clicks have landed since the last retrain, the run
also updates ``deepsent_new_clicks``, which schedules ``deepsent_retrain`` (so a daily ingest does not start a
retrain every day).
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from _assets import (
    CATALOG, CATALOG_ALIAS, CLICKS, CLICKS_ALIAS, NEW_CLICKS, REPORT, RETRAIN_EVERY_DAYS, catalog_event,
)
from _params import DEFAULT_ARGS, START_DATE, ingest_params
from airflow.sdk import CronDataIntervalTimetable, PokeReturnValue, dag, task


@dag(
    dag_id="deepsent_ingest",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=START_DATE,
    catchup=os.environ.get("DEEPSENT_INGEST_CATCHUP", "false").lower() == "true",
    max_active_runs=4,
    default_args=DEFAULT_ARGS,
    params=ingest_params(),
    tags=["deepsent"],
    doc_md=__doc__,
)
def deepsent_ingest() -> None:
    """Wait for the day's clicks or catalogue landing, ingest them, and announce enough new days to retrain."""

    @task.sensor(poke_interval=300, timeout=int(timedelta(hours=12).total_seconds()), mode="reschedule")
    def wait_for_landing(params: dict[str, Any] | None = None, data_interval_start: Any = None,
                         dag_run: Any = None) -> PokeReturnValue:
        """Poke the store for the day's click or catalogue landing folder; the slot is free between pokes."""
        import datetime as dt

        from _params import unknown_param_errors
        from _wiring import stage_settings
        from airflow.sdk.exceptions import AirflowFailException

        from pipeline.storage.store import Store
        from pipeline.ingest.paths import catalog_landing_prefix, landing_prefix

        if errors := unknown_param_errors(dag_run.conf, ingest_params()):
            raise AirflowFailException("bad params: " + "; ".join(errors))
        day = (params or {}).get("day") or data_interval_start.date().isoformat()
        store, date = Store.from_settings(stage_settings()), dt.date.fromisoformat(day)
        landed = store.exists(landing_prefix(date)) or store.exists(catalog_landing_prefix(date))
        return PokeReturnValue(is_done=landed, xcom_value=day)

    @task(outlets=[CLICKS_ALIAS, CATALOG_ALIAS])
    def ingest(day: str, outlet_events: Any = None) -> dict[str, Any]:
        """Ingest one day's catalogue, then its clicks (each replaced); an asset event for each that landed."""
        import datetime as dt

        from _wiring import log_result, stage_settings, xcom_value

        from pipeline.ingest.ingest import COUNT_KEYS, ingest_dates

        result = ingest_dates(stage_settings(), [dt.date.fromisoformat(day)])
        log_result("ingest", result)
        if day in result["per_date"]:  # a catalogue-only day leaves the click table alone: no new day of clicks
            outlet_events[CLICKS_ALIAS].add(CLICKS, extra={"dt": day, **{k: result[k] for k in COUNT_KEYS}})
        if (changed := catalog_event(result)) is not None:
            outlet_events[CATALOG_ALIAS].add(CATALOG, extra=changed)
        return xcom_value(result, drop=("per_date",))

    @task(inlets=[CLICKS, NEW_CLICKS, REPORT], outlets=[NEW_CLICKS])
    def announce_new_days(_ingested: dict[str, Any], inlet_events: Any = None, outlet_events: Any = None) -> dict[str, Any]:
        """Update deepsent_new_clicks once RETRAIN_EVERY_DAYS new days have landed since the last retrain
        (or announcement); otherwise skip: a skipped task updates no asset, so no retrain starts."""
        from _assets import new_days
        from airflow.sdk.exceptions import AirflowSkipException

        def latest(asset: Any) -> Any:
            return next((event.timestamp for event in inlet_events[asset].ascending(False).limit(1)), None)

        since = max((t for t in (latest(NEW_CLICKS), latest(REPORT)) if t is not None), default=None)
        events = inlet_events[CLICKS].after(since) if since is not None else inlet_events[CLICKS]
        days = new_days(((event.timestamp, (event.extra or {}).get("dt")) for event in events), since)
        if not RETRAIN_EVERY_DAYS:
            raise AirflowSkipException("retraining on new days is off (DEEPSENT_RETRAIN_EVERY_DAYS=0)")
        if len(days) < RETRAIN_EVERY_DAYS:
            raise AirflowSkipException(f"{len(days)} new day(s) of clicks since {since or 'the first ingest'}; "
                                       f"a retrain needs {RETRAIN_EVERY_DAYS}")
        outlet_events[NEW_CLICKS].extra = {"days": days}
        return {"days": days}

    announce_new_days(ingest(wait_for_landing()))


deepsent_ingest()
