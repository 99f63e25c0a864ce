"""Ingestion: ``landing/clicks/dt=D/*`` -> ``clicks/dt=D/part-0.parquet``, for each date.

For each landing file of the date (sorted by path; names starting with ``_`` or ``.`` such as
``_SUCCESS`` are markers, not data) the reader of its format yields records, and each row is

1. validated against LANDING_FIELDS, its ``ts`` within the landing date ± 1 day (a rejected row
   goes to the quarantine with file, line and reason: see :mod:`pipeline.ingest.formats.records` for
   the timestamp, position, encoding and size policies);
2. normalised as the paper does (lower case, whitespace tokens, numbers kept, no stemming),
   keeping the raw text beside it; a text that normalises to nothing is quarantined;
3. given an ``event_id`` (a hash of all its landing fields) and dropped when the same event
   was already seen in this date's partition (exact duplicates from retried log writes);
4. dropped with every other row of its user when that user is a bot (:mod:`pipeline.ingest.bots`).

Two engines do steps 1-3 with the same result, byte for byte: ``arrow`` (default,
:mod:`pipeline.ingest.arrow_path`: column-wise, handing the per-line path only the rows it is not
sure about) and ``per-line`` (:mod:`pipeline.ingest.reference_path`, the reference). Steps 3-4 and
the writes are :mod:`pipeline.ingest.assemble`. More than one landing file in all: files and
dates are ingested in parallel on Dask (:mod:`pipeline.ingest.parallel`).

The counts always satisfy ``rows_read = accepted + quarantined + duplicates + bot_rows``. The
clicks partition, the quarantine partition and the manifest ``clicks/_manifests/dt=D.json``
(counts, files, bot users, the bot rule; written last) are replaced as a whole, so re-running
a date gives the same bytes and never duplicates. An unreadable file, a missing column or a wrong
encoding stops with an InputError naming the file.

The date's catalogue files (``landing/catalog/dt=D/``) are ingested first, in date order
(:mod:`pipeline.ingest.catalog`); a click on a product not live in the date's catalogue is then quarantined
(``unknown_product``, :mod:`pipeline.ingest.assemble`). A date may hold only a catalogue (its clicks are then left alone); a
date with neither click nor catalogue files stops with an InputError naming its click folder.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Iterable

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, InputError
from pipeline.ingest.assemble import COUNT_KEYS, assemble_partition
from pipeline.ingest.bots import BOT_RULE
from pipeline.ingest.catalog.days import ingest_catalog_days
from pipeline.ingest.parallel import DEFAULT_ENGINE, ENGINES, check_engine, ingest_on_dask, read_landing_file
from pipeline.storage.store import Store
from pipeline.ingest.paths import (
    CLICKS_ROOT, LANDING_ROOT, STAGE, catalog_landing_prefix, clicks_path, data_files, landing_prefix, manifest_path,
    partition,
)

__all__ = ["CLICKS_ROOT", "COUNT_KEYS", "DEFAULT_ENGINE", "ENGINES", "LANDING_ROOT", "STAGE", "clicks_path",
           "ingest_dates", "ingest_partition", "landing_files", "landing_prefix", "manifest_path", "partition"]
log = logging.getLogger(__name__)


def ingest_dates(settings: Settings, dates: Iterable[dt.date], engine: str = DEFAULT_ENGINE,
                 allow_mass_retire: bool = False) -> dict[str, Any]:
    """Ingest every date (each replaces its partitions): its catalogue, then its clicks; per-date and total counts.

    All landing partitions are checked first, so a missing one fails before anything is written.
    ``allow_mass_retire`` lets a catalogue snapshot retire most of the catalogue (:mod:`pipeline.ingest.catalog`).
    """
    check_engine(engine)
    days = sorted(set(dates))
    if not days:
        raise ConfigError("no dates to ingest")
    store = Store.from_settings(settings)
    catalog_files = {day: data_files(store, catalog_landing_prefix(day)) for day in days}
    files = {day: landing_files(store, day, required=not catalog_files[day]) for day in days}
    catalog = ingest_catalog_days(store, catalog_files, allow_mass_retire)
    click_days = [day for day in days if files[day]]
    for day in sorted(set(days) - set(click_days)):
        log.info("ingest %s: no click files; the catalogue only", day.isoformat())
    if sum(len(paths) for paths in files.values()) > 1:
        manifests = ingest_on_dask(settings, {day: files[day] for day in click_days}, engine)
    else:
        # the default engine is not passed: callers may wrap ingest_partition(store, day, files) (the DAG retry test does)
        extra = {} if engine == DEFAULT_ENGINE else {"engine": engine}
        manifests = {day: ingest_partition(store, day, files[day], **extra) for day in click_days}
    per_date = {day.isoformat(): manifests[day] for day in click_days}
    totals = {key: sum(counts[key] for counts in per_date.values()) for key in COUNT_KEYS}
    return {
        "dates": [day.isoformat() for day in days],
        **totals,
        "bot_users": sum(len(counts["bot_users"]) for counts in per_date.values()),
        "bot_rule": BOT_RULE,
        "engine": engine,
        "partitions": [store.uri(clicks_path(day)) for day in click_days],
        "per_date": per_date,
        "catalog": catalog,
    }


def landing_files(store: Store, day: dt.date, required: bool = True) -> list[str]:
    """Data files of a date's landing partition; an InputError naming it when there are none and ``required``."""
    found = data_files(store, landing_prefix(day))
    if not found and required:
        raise InputError(store.uri(landing_prefix(day)), f"missing landing partition: no landing files for {day.isoformat()}")
    return found


def ingest_partition(store: Store, day: dt.date, files: list[str], engine: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """Read, validate, normalise, de-duplicate and de-bot one date in this process; write its three outputs."""
    return assemble_partition(store, day, [read_landing_file(store, path, day, engine) for path in files])
