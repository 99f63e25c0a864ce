"""The assets between the deepsent DAGs, and when a retrain runs.

::

    deepsent_ingest ──deepsent_clicks (every day with click files)──┐
                    ──deepsent_new_clicks (every N new days of clicks)──> deepsent_retrain (or weekly cron)
                    ──deepsent_catalog (every day with catalogue files)──> deepsent_index
    deepsent_retrain ──deepsent_report (every run)
                     ──deepsent_champion (only when a model is promoted)
                     ──deepsent_index (its index stage: the champion indexed, every run)
    deepsent_index (by hand) ──deepsent_index (every index built)

The assets of the chain's datasets are made from their records (``deepsent.datasets``). Light at import (stdlib,
airflow.sdk, the torch-free records): DAG parsing reads it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from airflow.sdk import Asset, AssetAlias, AssetOrTimeSchedule, CronTriggerTimetable

from deepsent.datasets import asset_of
from pipeline.core.validators import cron_or_empty, env_setting, non_negative_int


def _asset(dataset: str) -> Asset:
    """The asset of a dataset of the chain, named as its record (``deepsent.datasets``) says."""
    name, uri = asset_of(dataset)
    return Asset(name=name, uri=uri, group="deepsent")


#: The click table (clicks/dt=.../), updated by an ingest run whose day had click files (through the alias, so a day
#: with only a catalogue emits nothing and is no new day of clicks); the event's extra names the day (``dt``).
CLICKS = _asset("clicks")
CLICKS_ALIAS = AssetAlias(name="deepsent_clicks_days", group="deepsent")
#: "N new days of clicks have landed since the last retrain": emitted by deepsent_ingest, schedules deepsent_retrain.
NEW_CLICKS = Asset(name="deepsent_new_clicks", uri="x-deepsent://store/clicks/new-days", group="deepsent")
#: The published comparison table (reports/latest/), updated by every successful retrain run.
REPORT = _asset("latest")
#: The champion model (``models:/deepsent-ranker@champion``), updated only when a retrain promotes a model;
#: the event's extra holds the promoted ``model_uri``; deepsent_index, triggered by hand, indexes its latest one.
CHAMPION = _asset("champion")
#: The promote task emits through this alias, so a run that promotes nothing emits no champion event.
CHAMPION_ALIAS = AssetAlias(name="deepsent_champion_promotions", group="deepsent")
#: The catalogue (catalog/dt=.../): updated by a deepsent_ingest run whose day had catalogue files (through the alias,
#: so a day without one emits nothing); schedules deepsent_index, which refreshes the champion's index, no training.
CATALOG = _asset("catalog")
CATALOG_ALIAS = AssetAlias(name="deepsent_catalog_days", group="deepsent")
#: The champion's vector index (indexes/<model>/<version>/), updated by retrain's index stage and by deepsent_index.
INDEX = _asset("index")


def announce_index(result: Any, context: dict[str, Any]) -> None:
    """The champion's index (model, folder, version, run, count, type) as the extra of the ``deepsent_index`` event."""
    context["outlet_events"][INDEX].extra = {"model_uri": result.model_uri, "root": str(result.root),
                                             **{k: getattr(result, k) for k in ("version", "run_id", "count",
                                                                                "index_type")}}


#: Weekly, Monday 03:00 UTC. Empty = no time schedule.
RETRAIN_CRON = env_setting("DEEPSENT_RETRAIN_CRON", "0 3 * * 1", cron_or_empty)
#: Retrain once this many new days of clicks have landed since the last retrain (0 = only on the cron).
RETRAIN_EVERY_DAYS = env_setting("DEEPSENT_RETRAIN_EVERY_DAYS", "7", non_negative_int)


def catalog_event(result: dict[str, Any]) -> dict[str, Any] | None:
    """The extra of a ``deepsent_catalog`` event for an ingest ``result``: the days whose catalogue files landed and
    what they changed; None when no day had a file (a catalogue only carried forward changes nothing)."""
    landed = {day: facts for day, facts in result.get("catalog", {}).items() if facts.get("kind") != "carried"}
    if not landed:
        return None
    return {"days": sorted(landed), **{key: sum(int(facts.get(key, 0)) for facts in landed.values())
                                       for key in ("launches", "edits", "retirements")}}


def retrain_schedule() -> Any:
    """The retrain cron or ``RETRAIN_EVERY_DAYS`` new days of clicks, whichever comes first (None: by hand only)."""
    cron = CronTriggerTimetable(RETRAIN_CRON, timezone="UTC") if RETRAIN_CRON else None
    if cron and RETRAIN_EVERY_DAYS:
        return AssetOrTimeSchedule(timetable=cron, assets=NEW_CLICKS)
    return cron or (NEW_CLICKS if RETRAIN_EVERY_DAYS else None)


def new_days(click_events: Iterable[tuple[datetime, str]], last_retrain: datetime | None) -> list[str]:
    """The distinct days (``dt``) of click-table updates after ``last_retrain`` (all when None), sorted.

    ``click_events`` are (timestamp, dt) of ``deepsent_clicks`` events; a day ingested twice counts once.
    """
    return sorted({day for when, day in click_events if day and (last_retrain is None or when > last_retrain)})
