"""Where ingestion reads and writes, relative to the store root (one place for every ingest module)."""
from __future__ import annotations

import datetime as dt
import posixpath

from pipeline.core.errors import InputError
from pipeline.storage.store import Store
from pipeline.storage.locations import LOCATIONS, folder

LANDING_ROOT, CATALOG_LANDING_ROOT = LOCATIONS["landing"]
CLICKS_ROOT = folder("clicks")
STAGE = "ingest"
CATALOG_ROOT = folder("catalog")
CATALOG_STAGE = "catalog"  # its quarantine: quarantine/catalog/dt=D/


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


def catalog_landing_prefix(day: dt.date) -> str:
    """Landing folder of a date's catalogue files."""
    return f"{CATALOG_LANDING_ROOT}/{partition(day)}"


def catalog_path(day: dt.date) -> str:
    """The whole catalogue as of a date."""
    return f"{CATALOG_ROOT}/{partition(day)}/part-0.parquet"


def catalog_changes_path(day: dt.date) -> str:
    """A date's launches, edits and retirements."""
    return f"{CATALOG_ROOT}/changes/{partition(day)}/part-0.parquet"


def catalog_manifest_path(day: dt.date) -> str:
    """The catalogue manifest of a date (written last)."""
    return f"{CATALOG_ROOT}/_manifests/{partition(day)}.json"


def data_files(store: Store, prefix: str) -> list[str]:
    """The data files of a landing folder (names starting with ``_`` or ``.`` are markers); none is no error.
    A symbolic link is an InputError naming it: never read (nor echo into the quarantine) what the writer did
    not put there."""
    found = [f for f in store.list_files(prefix) if not posixpath.basename(f).startswith(("_", "."))]
    links = [f for f in found if not store.is_s3 and store.local_path(f).is_symlink()]
    if links:
        raise InputError(store.uri(links[0]), "a symbolic link; landing files must be regular files")
    return found
