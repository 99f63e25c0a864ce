"""A day's catalogue files applied to the catalogue of the day before: the new catalogue and its changes.

A snapshot's rows are the whole live catalogue; a delta's rows are applied in file order, then line order
(a later file may edit or retire what an earlier one launched). Rows rejected here go to the quarantine:

* a ``product_id`` seen earlier in the same file (in any snapshot file of the day, for a snapshot): the first
  row is kept;
* a ``retire`` of a product that is not live at that point.

The day's changes compare the catalogue before and after: a product new to it is a *launch*, one gone is a
*retire*, one whose raw title or attributes differ is an *edit*; every other live product is *unchanged*. So
``products_before = unchanged + edits + retirements`` and ``products = unchanged + edits + launches``.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import pyarrow as pa

from pipeline.core.errors import InputError
from pipeline.core.schemas import CATALOG_CHANGES_SCHEMA, CATALOG_SCHEMA
from pipeline.ingest.catalog.rows import CatalogFile

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
    """A day applied: the catalogue after it, its changes, its counts, the rows rejected ``(file, line, reason, raw)``."""

    catalog: Catalog
    changes: list[tuple[str, str, str | None, str | None]]
    counts: dict[str, int]
    rejected: list[tuple[str, int, str, str]]


def apply_day(base: Catalog, files: Sequence[CatalogFile], day: dt.date) -> DayResult:
    """The catalogue of ``day`` from ``base`` (the day before) and the day's files (all snapshots or all deltas)."""
    snapshot = bool(files) and files[0].snapshot
    state: Catalog = {} if snapshot else dict(base)
    rejected: list[tuple[int, int, str, str, str]] = []
    seen: dict[str, tuple[str, int]] = {}
    for index, file in enumerate(files):
        rejected += [(index, line, file.path, reason, raw) for line, reason, raw in file.rejected]
        if not snapshot:
            seen = {}
        for row in file.rows:
            first = seen.setdefault(row.product_id, (file.path, row.line))
            if first != (file.path, row.line):
                where = f"line {first[1]}" + ("" if first[0] == file.path else f" of {first[0]}")
                reason = f"duplicate product_id: {row.product_id!r} first at {where}"
                rejected.append((index, row.line, file.path, reason, row.raw))
            elif row.retire and row.product_id not in state:
                rejected.append((index, row.line, file.path,
                                 f"retire of an unknown product_id: {row.product_id!r} is not in the catalogue", row.raw))
            elif row.retire:
                del state[row.product_id]
            else:
                before = base.get(row.product_id) if snapshot else state.get(row.product_id)
                state[row.product_id] = _upserted(before, row.title_raw, row.title, row.attributes, day)
    rows_in = sum(f.rows_read for f in files)
    changes = diff(base, state)
    counts = {"rows_in": rows_in, "kept": rows_in - len(rejected), "quarantined": len(rejected),
              **_tally(base, state, changes)}
    return DayResult(state, changes, counts, [(path, line, reason, raw) for _, line, path, reason, raw in sorted(rejected)])


def carried(base: Catalog) -> DayResult:
    """A day without a file: the catalogue of the day before, unchanged."""
    return DayResult(dict(base), [], {"rows_in": 0, "kept": 0, "quarantined": 0, **_tally(base, base, [])}, [])


def check_mass_retire(result: DayResult, where: str, allow: bool) -> None:
    """An InputError naming ``where`` when a snapshot retires more than MAX_RETIRE_SHARE of the live catalogue."""
    before, retired = result.counts["products_before"], result.counts["retirements"]
    if allow or not before or retired <= MAX_RETIRE_SHARE * before:
        return
    raise InputError(where, f"this snapshot would retire {retired:,} of the {before:,} live products "
                     f"({retired / before:.0%}, over the limit of {MAX_RETIRE_SHARE:.0%}): a broken feed? Nothing was "
                     f"written; if the retirements are meant, ingest the day again with {ALLOW_FLAG}")


def diff(before: Catalog, after: Catalog) -> list[tuple[str, str, str | None, str | None]]:
    """``(product_id, change, old_title, new_title)`` of every launched, edited or retired product, by product_id."""
    out = []
    for product_id in sorted(before.keys() | after.keys()):
        old, new = before.get(product_id), after.get(product_id)
        if old is None:
            out.append((product_id, "launch", None, new.title))  # type: ignore[union-attr]
        elif new is None:
            out.append((product_id, "retire", old.title, None))
        elif new != old:
            out.append((product_id, "edit", old.title, new.title))
    return out


def catalog_table(catalog: Catalog) -> pa.Table:
    """The catalogue as a CATALOG_SCHEMA table sorted by product_id."""
    ids = sorted(catalog)
    columns = list(zip(*(catalog[i] for i in ids))) if ids else [(), (), (), (), ()]
    return pa.table([pa.array(ids, pa.string()), *(pa.array(c, f.type) for c, f in zip(columns, list(CATALOG_SCHEMA)[1:]))],
                    schema=CATALOG_SCHEMA)


def catalog_from_table(table: pa.Table) -> Catalog:
    """A CATALOG_SCHEMA table back as a catalogue."""
    columns = [table.column(name).to_pylist() for name in CATALOG_SCHEMA.names]
    return {row[0]: Product(*row[1:]) for row in zip(*columns)}


def changes_table(changes: list[tuple[str, str, str | None, str | None]]) -> pa.Table:
    """The changes as a CATALOG_CHANGES_SCHEMA table."""
    columns = list(zip(*changes)) if changes else [(), (), (), ()]
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, CATALOG_CHANGES_SCHEMA)], schema=CATALOG_CHANGES_SCHEMA)


def _upserted(before: Product | None, title_raw: str, title: str, attributes: str, day: dt.date) -> Product:
    if before is None:
        return Product(title_raw, title, attributes, day, day)
    if (before.title_raw, before.attributes) == (title_raw, attributes):
        return before
    return before._replace(title_raw=title_raw, title=title, attributes=attributes, updated=day)


def _tally(before: Catalog, after: Catalog, changes: list[tuple[str, str, str | None, str | None]]) -> dict[str, int]:
    kinds = [change for _, change, _, _ in changes]
    launches, edits, retirements = kinds.count("launch"), kinds.count("edit"), kinds.count("retire")
    return {"launches": launches, "edits": edits, "retirements": retirements,
            "unchanged": len(after) - launches - edits, "products_before": len(before), "products": len(after)}
