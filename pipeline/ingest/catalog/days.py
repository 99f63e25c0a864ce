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

Days come in date order: a run that leaves out a later day that already has a catalogue (ingesting an older day,
or one day again) is first built in memory, and refused with one line naming both days, before anything is
written, when that later day would now be built on another catalogue than the one it was (:func:`check_order`);
re-running a day on the same files, or adding a day that changes nothing, passes.
"""
from __future__ import annotations

import datetime as dt
import logging
import posixpath
import re
from typing import Any

from pipeline.core.errors import DeepsentError, InputError
from pipeline.storage import artifacts
from pipeline.storage.artifacts import ArtifactError
from pipeline.storage.quarantine import Quarantine, quarantine_prefix
from pipeline.storage.schemas import CATALOG_SCHEMA
from pipeline.storage.store import Store
from pipeline.ingest.catalog.apply import (
    CHANGE_KINDS, MAX_RETIRE_SHARE, Catalog, DayResult, apply_day, carried, catalog_from_table, catalog_table,
    check_mass_retire,
)
from pipeline.ingest.catalog.rows import SNAPSHOT_PREFIX, day_rows, is_snapshot
from pipeline.ingest.paths import (
    CATALOG_ROOT, CATALOG_STAGE, catalog_changes_path, catalog_landing_prefix, catalog_manifest_path, catalog_path,
    partition,
)

log = logging.getLogger(__name__)
_MANIFEST_NAME = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})\.json$")


def ingest_catalog_days(store: Store, files: dict[dt.date, list[str]],
                        allow_mass_retire: bool = False) -> dict[str, Any]:
    """Ingest the catalogue of every day of ``files`` (day -> its catalogue files), in date order; the manifests
    of the days that have a catalogue, by ISO date. A run that would leave a later day's catalogue built on
    another one is refused first (:func:`check_order`)."""
    check_order(store, files, allow_mass_retire)
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
    result, facts = build_day(store, day, paths, base_day, base, allow_mass_retire)
    if facts["kind"] == "carried":
        facts["source_date"] = base_manifest.get("source_date", facts["base_date"])
    return _write_day(store, day, result, facts, allow_mass_retire)


def build_day(store: Store, day: dt.date, paths: list[str], base_day: dt.date | None, base: Catalog,
              allow_mass_retire: bool) -> tuple[DayResult, dict[str, Any]]:
    """The catalogue of ``day`` built on ``base`` (the catalogue of ``base_day``) from its files, read as they are
    applied, with the facts its manifest records; nothing written. A bad file or a mass retirement is an
    InputError."""
    facts: dict[str, Any] = {"base_date": base_day.isoformat() if base_day else None, "carried_from": None,
                             "source_date": day.isoformat(), "files": {}}
    if not paths:
        log.info("catalog %s: no catalogue file; keeping the catalogue of %s (%d products)", day, base_day, len(base))
        facts.update(kind="carried", carried_from=facts["base_date"])
        return carried(base), facts
    snapshots = [is_snapshot(p) for p in paths]
    prefix = store.uri(catalog_landing_prefix(day))
    if any(snapshots) and not all(snapshots):
        raise InputError(prefix, f"snapshot ({SNAPSHOT_PREFIX}*) and delta files on one day; a day holds a "
                         "snapshot or deltas, never both")
    result = apply_day(base, day_rows(store, paths), day, all(snapshots))
    facts.update(kind="snapshot" if all(snapshots) else "delta", files=result.files)
    if facts["kind"] == "snapshot":
        check_mass_retire(result, store.uri(paths[0]) if len(paths) == 1 else prefix, allow_mass_retire)
    return result, facts


def check_order(store: Store, files: dict[dt.date, list[str]], allow_mass_retire: bool = False) -> None:
    """An InputError, before anything is written, when ingesting the days of ``files`` would leave a day it leaves
    out, later than its first, built on a catalogue other than the one the run gives the day before it."""
    run, written = sorted(files), catalog_days(store)
    if not any(d > run[0] and d not in files for d in written):
        return  # the usual case: the newest days, or every day from the first one on
    current: tuple[dt.date, Catalog | None] | None = None  # the latest day so far and its catalogue (None: unread)
    for day in sorted(set(run) | set(written)):
        base_day, base = current if current else (None, {})
        if day not in files:
            if base_day in files:  # built in this run: what the day was built on must not change
                _check_base(store, day, base_day, base or {}, run, written)
            current = (day, None)
            continue
        if base is None and base_day is not None:
            base = read_catalog(store, base_day)[0]
        if files[day] or base_day is not None:
            current = (day, build_day(store, day, files[day], base_day, base or {}, allow_mass_retire)[0].catalog)


def _check_base(store: Store, day: dt.date, previous: dt.date, catalog: Catalog, run: list[dt.date],
                written: list[dt.date]) -> None:
    """An InputError when ``day``'s catalogue was built on another than ``catalog``, the one ``previous`` now has."""
    built_on = store.read_json(catalog_manifest_path(day)).get("base_date")
    if catalog == (read_catalog(store, dt.date.fromisoformat(built_on))[0] if built_on else {}):
        return
    last = max(written[-1], run[-1])
    raise InputError(store.uri(catalog_landing_prefix(previous)),
                     f"the catalogue of {day} was built on {f'that of {built_on}' if built_on else 'none'}, and "
                     f"ingesting {previous} now gives it another one: {day} would be left stale. Nothing was written; "
                     f"ingest {run[0]} to {last} again in one run, in date order (deepsent ingest --start {run[0]} "
                     f"--end {last})")


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
    store.replace_dataset(posixpath.dirname(catalog_changes_path(day)), [("part-0.parquet", result.changes)])
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
