"""Where ingestion reads and writes, relative to the store root (one place for every ingest module)."""
from __future__ import annotations

import datetime as dt

LANDING_ROOT = "landing/clicks"
CLICKS_ROOT = "clicks"
STAGE = "ingest"


def partition(day: dt.date) -> str:
    """Partition folder name of a date, e.g. ``dt=2026-01-01``."""
    return f"dt={day.isoformat()}"


def landing_prefix(day: dt.date) -> str:
    """Landing folder of a date."""
    return f"{LANDING_ROOT}/{partition(day)}"


def clicks_path(day: dt.date) -> str:
    """The clicks file of a date."""
    return f"{CLICKS_ROOT}/{partition(day)}/part-0.parquet"


def manifest_path(day: dt.date) -> str:
    """The ingest manifest of a date (underscore folder: skipped by Parquet dataset readers)."""
    return f"{CLICKS_ROOT}/_manifests/{partition(day)}.json"
