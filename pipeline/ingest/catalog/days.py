"""Each day's catalogue: its files applied to the latest earlier catalogue, written with its changes and quarantine.

Per day, in date order (a day builds on the one before): the catalogue of the latest earlier day that has a
manifest (checked against the files it recorded) is the base; the day's files are read (:mod:`.rows`) and
applied (:mod:`.apply`), or, without a file, the base is kept (a *carried* day, said in the log and the
manifest's ``carried_from``). A store that has never had a catalogue file gets nothing written. Outputs,
replaced as a whole (the manifest last), so a re-run gives the same bytes:

    catalog/dt=D/part-0.parquet              CATALOG_SCHEMA
    catalog/changes/dt=D/part-0.parquet      CATALOG_CHANGES_SCHEMA
    quarantine/catalog/dt=D/part-0.parquet   QUARANTINE_SCHEMA
    catalog/_manifests/dt=D.json             counts (rows_in = kept + quarantined, launches, edits, retirements,
                                             unchanged, products), files, base and source days, file checksums

Re-ingesting a day changes what later days were built on: ingest them again after it.
"""
from __future__ import annotations

import datetime as dt
import logging
import posixpath
import re
from typing import Any

from pipeline.core import artifacts
from pipeline.core.artifacts import ArtifactError
from pipeline.core.errors import DeepsentError, InputError
from pipeline.core.quarantine import Quarantine, quarantine_prefix
from pipeline.core.schemas import CATALOG_SCHEMA
from pipeline.core.store import Store
from pipeline.ingest.catalog.apply import (
    CHANGE_KINDS, MAX_RETIRE_SHARE, Catalog, DayResult, apply_day, carried, catalog_from_table, catalog_table,
    changes_table, check_mass_retire,
)
from pipeline.ingest.catalog.rows import SNAPSHOT_PREFIX, is_snapshot, read_catalog_file
from pipeline.ingest.paths import (
    CATALOG_ROOT, CATALOG_STAGE, catalog_changes_path, catalog_landing_prefix, catalog_manifest_path, catalog_path,
    partition,
)

log = logging.getLogger(__name__)
_MANIFEST_NAME = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})\.json$")


def ingest_catalog_days(store: Store, files: dict[dt.date, list[str]],
                        allow_mass_retire: bool = False) -> dict[str, Any]:
    """Ingest the catalogue of every day of ``files`` (day -> its catalogue files), in date order; the manifests
    of the days that have a catalogue, by ISO date."""
    out = {}
    for day in sorted(files):
        manifest = ingest_catalog_day(store, day, files[day], allow_mass_retire)
        if manifest is not None:
            out[day.isoformat()] = manifest
    return out


def ingest_catalog_day(store: Store, day: dt.date, paths: list[str],
                       allow_mass_retire: bool = False) -> dict[str, Any] | None:
    """One day's catalogue written; its manifest, or None when there is no file and no earlier catalogue."""
    base_day = previous_catalog_day(store, day)
    if not paths and base_day is None:
        return None
    base, base_manifest = read_catalog(store, base_day) if base_day else ({}, {})
    facts: dict[str, Any] = {"base_date": base_day.isoformat() if base_day else None, "carried_from": None,
                             "source_date": day.isoformat(), "files": {}}
    if not paths:
        result = carried(base)
        facts.update(kind="carried", carried_from=facts["base_date"],
                     source_date=base_manifest.get("source_date", facts["base_date"]))
        log.info("catalog %s: no catalogue file; keeping the catalogue of %s (%d products)", day, base_day, len(base))
    else:
        snapshots = [is_snapshot(p) for p in paths]
        prefix = store.uri(catalog_landing_prefix(day))
        if any(snapshots) and not all(snapshots):
            raise InputError(prefix, f"snapshot ({SNAPSHOT_PREFIX}*) and delta files on one day; a day holds a "
                             "snapshot or deltas, never both")
        files = [read_catalog_file(store, p) for p in paths]
        result = apply_day(base, files, day)
        facts.update(kind="snapshot" if all(snapshots) else "delta", files={f.path: f.rows_read for f in files})
        if facts["kind"] == "snapshot":
            check_mass_retire(result, store.uri(paths[0]) if len(paths) == 1 else prefix, allow_mass_retire)
    return _write_day(store, day, result, facts, allow_mass_retire)


def catalog_days(store: Store) -> list[dt.date]:
    """Every day whose catalogue was written (its manifest is there), in date order."""
    names = [m.group(1) for f in store.list_files(f"{CATALOG_ROOT}/_manifests", ".json")
             if (m := _MANIFEST_NAME.match(posixpath.basename(f)))]
    return sorted(d for d in map(_date, names) if d is not None)


def previous_catalog_day(store: Store, day: dt.date) -> dt.date | None:
    """The latest day before ``day`` whose catalogue was written, or None."""
    return max((d for d in catalog_days(store) if d < day), default=None)


def latest_catalog(store: Store) -> tuple[str, list[tuple[str, str]]] | None:
    """The store path of the latest catalogue and its live products ``(product_id, normalised title)`` by id; None
    for a store that has no catalogue."""
    days = catalog_days(store)
    if not days:
        return None
    catalog, _ = read_catalog(store, days[-1])
    return catalog_path(days[-1]), [(product_id, catalog[product_id].title) for product_id in sorted(catalog)]


def live_product_ids(store: Store, day: dt.date) -> frozenset[str] | None:
    """The product ids live in ``day``'s catalogue; None when the store has no catalogue for that day."""
    if not store.exists(catalog_manifest_path(day)):
        return None
    return frozenset(read_catalog(store, day)[0])


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:  # not a day (dt=2026-13-45): not a manifest ingest wrote
        return None


def read_catalog(store: Store, day: dt.date) -> tuple[Catalog, dict[str, Any]]:
    """The catalogue of ``day`` and its manifest, its file checked against the manifest (ArtifactError naming it)."""
    rebuild = f"deepsent ingest --date {day.isoformat()}"
    manifest = artifacts.read_manifest(store, catalog_manifest_path(day), rebuild)
    artifacts.require_keys(store, catalog_manifest_path(day), manifest, ("catalog_files",), rebuild)
    folder = posixpath.dirname(catalog_path(day))
    artifacts.verify_files(store, folder, manifest["catalog_files"], rebuild)
    table = store.read_table(catalog_path(day))
    if table.schema != CATALOG_SCHEMA:
        raise ArtifactError(store.uri(catalog_path(day)), "not a catalogue (its columns differ from CATALOG_SCHEMA)",
                            rebuild)
    return catalog_from_table(table), manifest


def _write_day(store: Store, day: dt.date, result: DayResult, facts: dict[str, Any],
               allow_mass_retire: bool) -> dict[str, Any]:
    quarantine = Quarantine(CATALOG_STAGE)
    for path, line, reason, raw in result.rejected:
        quarantine.add(path, line, reason, raw)
    counts = result.counts
    if counts["rows_in"] != counts["kept"] + counts["quarantined"]:
        raise DeepsentError(f"catalog {day}: count identity broken {counts} (a bug, please report)")
    folder = posixpath.dirname(catalog_path(day))
    written = store.replace_dataset(folder, [("part-0.parquet", catalog_table(result.catalog))])
    store.replace_dataset(posixpath.dirname(catalog_changes_path(day)), [("part-0.parquet", changes_table(result.changes))])
    quarantine.write(store, partition(day))
    manifest = {
        "date": day.isoformat(),
        **facts,
        **counts,
        "quarantine_reasons": quarantine.reasons(),
        "max_retire_share": MAX_RETIRE_SHARE,
        "mass_retire_allowed": allow_mass_retire and facts["kind"] == "snapshot"
        and counts["retirements"] > MAX_RETIRE_SHARE * counts["products_before"],
        "outputs": {"catalog": catalog_path(day), "changes": catalog_changes_path(day),
                    "quarantine": f"{quarantine_prefix(CATALOG_STAGE, partition(day))}/part-0.parquet"},
        "catalog_files": artifacts.file_facts(store, folder, written),
    }
    store.write_json(catalog_manifest_path(day), manifest)
    log.info("catalog %s: rows in %d = kept %d + quarantined %d; %s", day, counts["rows_in"], counts["kept"],
             counts["quarantined"], ", ".join(f"{k} {counts[k]}" for k in (*CHANGE_KINDS, "products")))
    return manifest
