"""The landed days ``deepsent run --from-landing`` ingests: the landing area as it is, no simulator.

A day is landed when ``landing/clicks/dt=D/`` or ``landing/catalog/dt=D/`` holds a data file (names starting with
``_`` or ``.`` are markers, as for ingest). Three refusals, each one line naming the folder and the fix: no landed
day at all, no landed day in ``--start``/``--end``, and click days without any catalogue (neither landed in the
range nor ingested before it): the corpus ``deepsent search`` serves is the catalogue, and the fallback of a store
that never had one (the judged files' titles) would serve titles that are not the team's products.
"""
from __future__ import annotations

import datetime as dt
import re

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.ingest.catalog.days import catalog_days
from pipeline.ingest.paths import CATALOG_LANDING_ROOT, LANDING_ROOT
from pipeline.storage.store import Store

_DAY_FOLDER = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})/(?:.*/)?[^_./][^/]*$")


def landed_days(settings: Settings, start: dt.date | None = None, end: dt.date | None = None) -> tuple[dt.date, ...]:
    """Every landed day from ``start`` to ``end`` (inclusive; open when None), in order; a ConfigError when none."""
    store = Store.from_settings(settings)
    clicks, catalog = _days(store, LANDING_ROOT), _days(store, CATALOG_LANDING_ROOT)
    landed = sorted(clicks | catalog)
    if not landed:
        raise ConfigError(f"{store.uri('landing')}: no landed day (no data file in {LANDING_ROOT}/dt=YYYY-MM-DD/ nor "
                          f"{CATALOG_LANDING_ROOT}/dt=YYYY-MM-DD/); land your click files and a catalogue snapshot "
                          "there (README, 'Your own data'), or run without --from-landing to simulate them")
    if start and end and end < start:
        raise ConfigError(f"--end {end} is before --start {start}")
    chosen = tuple(d for d in landed if (start is None or d >= start) and (end is None or d <= end))
    if not chosen:
        raise ConfigError(f"{store.uri('landing')}: no landed day from {start or 'the first'} to {end or 'the last'} "
                          f"(landed: {_span(landed)}); choose --start/--end within them, or leave both out")
    if any(d in clicks for d in chosen) and not any(d in catalog for d in chosen) and not _ingested_catalog(store, chosen):
        raise ConfigError(f"{store.uri(CATALOG_LANDING_ROOT)}: no catalogue for the clicks of {_span(list(chosen))}; "
                          f"land one as {CATALOG_LANDING_ROOT}/dt={chosen[0]}/snapshot.csv (product_id,title): "
                          "the catalogue is the corpus deepsent search serves")
    return chosen


def _days(store: Store, root: str) -> set[dt.date]:
    """The days of ``root`` whose ``dt=D`` folder holds a data file."""
    days = set()
    for path in store.list_files(root):
        match = _DAY_FOLDER.match(path[len(root) + 1:])
        if match:
            try:
                days.add(dt.date.fromisoformat(match.group(1)))
            except ValueError:  # dt=2026-13-45 is no day; ingest would never be asked for it
                continue
    return days


def _ingested_catalog(store: Store, days: tuple[dt.date, ...]) -> bool:
    """Whether the store already has a catalogue ingested on or before the last of ``days`` (carried forward)."""
    return any(d <= days[-1] for d in catalog_days(store))


def _span(days: list[dt.date]) -> str:
    """``2026-01-01`` or ``2026-01-01 .. 2026-01-03 (3 days)``."""
    return str(days[0]) if len(days) == 1 else f"{days[0]} .. {days[-1]} ({len(days)} days)"
