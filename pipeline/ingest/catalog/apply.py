"""A day's catalogue files applied to the catalogue of the day before: the new catalogue and its changes.

A snapshot's rows are the whole live catalogue; a delta's rows are applied in file order, then line order
(a later file may edit or retire what an earlier one launched), one at a time as they are read (so that what a day
holds is its catalogue and its rejected rows, their raw text cut to the quarantine's 4 KiB, never a file). Rows
rejected here go to the quarantine:

* a ``product_id`` seen earlier in the same file (in any snapshot file of the day, for a snapshot): the first
  row is kept;
* a ``retire`` of a product that is not live at that point.

The day's changes compare the catalogue before and after: a product new to it is a *launch*, one gone is a
*retire*, one whose raw title or attributes differ is an *edit*; every other live product is *unchanged*. So
``products_before = unchanged + edits + retirements`` and ``products = unchanged + edits + launches``.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple, Sequence

import pyarrow as pa

from pipeline.core.errors import InputError
from pipeline.ingest.catalog.rows import CatalogRow, Rejected
from pipeline.storage.quarantine import RAW_LIMIT_BYTES, truncate_utf8
from pipeline.storage.schemas import CATALOG_CHANGES_SCHEMA, CATALOG_SCHEMA

#: A snapshot retiring more than this share of the live catalogue is refused unless the operator allows it.
MAX_RETIRE_SHARE = 0.5
ALLOW_FLAG = "--allow-mass-retire"
CHANGE_KINDS = ("launches", "edits", "retirements", "unchanged")


class Product(NamedTuple):
    """One live product of the catalogue."""

    title_raw: str
    title: str
    attributes: str
    since: dt.date
    updated: dt.date


#: product_id -> its state.
Catalog = dict[str, Product]


@dataclass
class DayResult:
    """A day applied: the catalogue after it, its changes, its counts, the rows rejected ``(file, line, reason, raw)``
    and the rows read of each file."""

    catalog: Catalog
    changes: pa.Table  # CATALOG_CHANGES_SCHEMA
    counts: dict[str, int]
    rejected: list[tuple[str, int, str, str]]
    files: dict[str, int] = field(default_factory=dict)


def apply_day(base: Catalog, files: Sequence[tuple[str, Iterable[CatalogRow | Rejected]]], day: dt.date,
              snapshot: bool) -> DayResult:
    """The catalogue of ``day`` from ``base`` (the day before) and the rows of each of the day's files ``(path,
    rows)``, all snapshots or all deltas, taken one at a time as they are read."""
    state: Catalog = {} if snapshot else dict(base)
    seen: dict[str, int] = {}  # product_id -> its first row, as file index << 32 | line

    def apply(row: CatalogRow, index: int) -> str | None:  # the reason the row is rejected, or None
        first = seen.setdefault(row.product_id, index << 32 | row.line)
        if first != index << 32 | row.line:
            where = f"line {first & 0xFFFFFFFF}" + ("" if first >> 32 == index else f" of {files[first >> 32][0]}")
            return f"duplicate product_id: {row.product_id!r} first at {where}"
        if row.retire and row.product_id not in state:
            return f"retire of an unknown product_id: {row.product_id!r} is not in the catalogue"
        if row.retire:
            del state[row.product_id]
        else:
            before = base.get(row.product_id) if snapshot else state.get(row.product_id)
            state[row.product_id] = _upserted(before, row.title_raw, row.title, row.attributes, day)
        return None

    rejected: list[tuple[str, int, str, str]] = []
    reasons: dict[str, str] = {}  # one string for each reason, however many rows have it
    rows_read: dict[str, int] = {}
    for index, (path, rows) in enumerate(files):
        if not snapshot:
            seen.clear()
        rows_read[path] = 0
        for row in rows:
            rows_read[path] += 1
            reason = row.reason if isinstance(row, Rejected) else apply(row, index)
            if reason is not None:
                rejected.append((path, row.line, reasons.setdefault(reason, reason),
                                 truncate_utf8(row.raw, RAW_LIMIT_BYTES)))
    seen.clear()
    rows_in = sum(rows_read.values())
    changes, kinds = diff(base, state)
    counts = {"rows_in": rows_in, "kept": rows_in - len(rejected), "quarantined": len(rejected),
              **_tally(base, state, kinds)}
    return DayResult(state, changes, counts, rejected, rows_read)


def carried(base: Catalog) -> DayResult:
    """A day without a file: the catalogue of the day before, unchanged."""
    return DayResult(dict(base), diff({}, {})[0], {"rows_in": 0, "kept": 0, "quarantined": 0,
                                                   **_tally(base, base, {})}, [])


def check_mass_retire(result: DayResult, where: str, allow: bool) -> None:
    """An InputError naming ``where`` when a snapshot retires more than MAX_RETIRE_SHARE of the live catalogue."""
    before, retired = result.counts["products_before"], result.counts["retirements"]
    if allow or not before or retired <= MAX_RETIRE_SHARE * before:
        return
    raise InputError(where, f"this snapshot would retire {retired:,} of the {before:,} live products "
                     f"({retired / before:.0%}, over the limit of {MAX_RETIRE_SHARE:.0%}): a broken feed? Nothing was "
                     f"written; if the retirements are meant, ingest the day again with {ALLOW_FLAG}")


def diff(before: Catalog, after: Catalog) -> tuple[pa.Table, dict[str, int]]:
    """Every launched, edited or retired product ``(product_id, change, old_title, new_title)`` by product_id, as a
    CATALOG_CHANGES_SCHEMA table, and the count of each change."""
    columns: tuple[list[str], list[str], list[str | None], list[str | None]] = ([], [], [], [])
    ids, changes, old_titles, new_titles = columns
    for product_id in sorted(before.keys() | after.keys()):
        old, new = before.get(product_id), after.get(product_id)
        if old is None or new is None or new != old:
            ids.append(product_id)
            changes.append("launch" if old is None else "retire" if new is None else "edit")
            old_titles.append(None if old is None else old.title)
            new_titles.append(None if new is None else new.title)
    kinds = {kind: changes.count(kind) for kind in ("launch", "edit", "retire")}
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, CATALOG_CHANGES_SCHEMA)],
                    schema=CATALOG_CHANGES_SCHEMA), kinds


def catalog_table(catalog: Catalog) -> pa.Table:
    """The catalogue as a CATALOG_SCHEMA table sorted by product_id."""
    ids = sorted(catalog)
    return pa.table([pa.array(ids, pa.string()), *(pa.array([catalog[i][k] for i in ids], f.type)
                                                   for k, f in enumerate(list(CATALOG_SCHEMA)[1:]))],
                    schema=CATALOG_SCHEMA)


def catalog_from_table(table: pa.Table) -> Catalog:
    """A CATALOG_SCHEMA table back as a catalogue (one object for each distinct date and attributes text)."""
    shared: dict[Any, Any] = {}
    columns = [table.column(name).to_pylist() for name in CATALOG_SCHEMA.names]
    for name in ("attributes", "since", "updated"):
        column = columns[CATALOG_SCHEMA.names.index(name)]
        column[:] = [shared.setdefault(value, value) for value in column]
    return {row[0]: Product(*row[1:]) for row in zip(*columns)}


def _upserted(before: Product | None, title_raw: str, title: str, attributes: str, day: dt.date) -> Product:
    if before is None:
        return Product(title_raw, title, attributes, day, day)
    if (before.title_raw, before.attributes) == (title_raw, attributes):
        return before
    return before._replace(title_raw=title_raw, title=title, attributes=attributes, updated=day)


def _tally(before: Catalog, after: Catalog, kinds: dict[str, int]) -> dict[str, int]:
    launches, edits, retirements = (kinds.get(k, 0) for k in ("launch", "edit", "retire"))
    return {"launches": launches, "edits": edits, "retirements": retirements,
            "unchanged": len(after) - launches - edits, "products_before": len(before), "products": len(after)}
