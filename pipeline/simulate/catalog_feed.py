"""The simulator's catalogue feed: the Home Depot products as daily files in ``landing/catalog/dt=D/``.

On unless ``SimParams.catalog_feed`` is 0. The products are those of the training judgments (each
``product_uid`` with its first title). The first simulated day gets ``snapshot.<format>``: every product not
launched later. Each later day with a change gets ``delta.<format>`` (``op`` upsert or retire); a day without
one gets no file, so ingest keeps the day before. Who changes, and when, is drawn once for the seed and the
number of days (numpy seeded by ``(seed, 0, 1)``, so the clicks' draws are untouched):

* ``catalog_launch_share`` of the products are absent from the snapshot and launched on a later day (uniform);
* ``catalog_retire_share`` are retired on a day after their launch (uniform; none when there is no such day);
* ``catalog_edit_share`` get their title edited (one of :data:`EDIT_WORDS` appended) on a day after their
  launch and before their retirement.

The same seed and days give the same bytes. The click model shows a day only the products live that day
(:meth:`CatalogPlan.shown`): none before its launch day nor from its retirement day on, each under its catalogue
title (an edited title from its edit day on).
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest.catalog.rows import SNAPSHOT_PREFIX
from pipeline.ingest.paths import catalog_landing_prefix
from pipeline.simulate.sim_params import SimParams
from pipeline.storage.store import Store

EDIT_WORDS = ("new", "pro", "plus", "2-pack", "value")
#: One row of a catalogue file: (product_id, title or None, op or None).
Row = tuple[str, "str | None", "str | None"]


@dataclass(frozen=True)
class Shown:
    """What one day's searches may show: which rows are live, and the edited title of a row (row -> title)."""

    live: np.ndarray
    titles: dict[int, str]


@dataclass(frozen=True)
class CatalogPlan:
    """Every product and the day offsets of its launch (0 = in the snapshot), edit and retirement (-1 = never)."""

    doc_ids: list[str]
    titles: list[str]
    launch: np.ndarray
    edit: np.ndarray
    retire: np.ndarray
    word: np.ndarray

    def rows(self, offset: int) -> list[Row]:
        """The rows of day ``offset``'s file: the snapshot on day 0, else that day's launches, edits, retirements."""
        if offset == 0:
            return [(self.doc_ids[i], self.titles[i], None) for i in np.flatnonzero(self.launch == 0)]
        changed = np.flatnonzero((self.launch == offset) | (self.edit == offset) | (self.retire == offset))
        return [self._change(int(i), offset) for i in changed]

    def _change(self, i: int, offset: int) -> Row:
        if self.retire[i] == offset:
            return (self.doc_ids[i], None, "retire")
        title = self.titles[i] if self.launch[i] == offset else self.edited_title(i)
        return (self.doc_ids[i], title, "upsert")

    def live(self, offset: int) -> np.ndarray:
        """Which products are live on day ``offset``: launched by then and not yet retired."""
        return (self.launch <= offset) & ((self.retire < 0) | (self.retire > offset))

    def edited_title(self, i: int) -> str:
        """Product ``i``'s title from its edit day on (one of :data:`EDIT_WORDS` appended)."""
        return f"{self.titles[i]} {EDIT_WORDS[self.word[i]]}"

    def shown(self, products: np.ndarray, titles: list[str], offset: int) -> Shown:
        """What day ``offset`` may show of the rows naming ``products`` (indexes into ``doc_ids``, one per row) with
        ``titles``: the live ones, each with its product's title in the catalogue that day where it differs."""
        edited = (self.edit >= 0) & (self.edit <= offset)
        named = {row: self.edited_title(p) if edited[p] else self.titles[p]
                 for row, p in enumerate(products.tolist()) if edited[p] or titles[row] != self.titles[p]}
        return Shown(self.live(offset)[products], named)

    def products_of(self, doc_ids: list[str]) -> np.ndarray:
        """The product index of each of ``doc_ids`` (every one a product of the plan)."""
        index = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}
        return np.array([index[d] for d in doc_ids], dtype=np.int64)

    def counts(self) -> dict[str, int]:
        """How many products are in the snapshot, launched later, edited and retired."""
        return {"snapshot_products": int((self.launch == 0).sum()), "launches": int((self.launch > 0).sum()),
                "edits": int((self.edit > 0).sum()), "retirements": int((self.retire > 0).sum())}


def catalog_plan(doc_ids: list[str], titles: list[str], params: SimParams, seed: int, days: int) -> CatalogPlan:
    """The seeded churn of the products (first title of each id) over ``days`` days."""
    first = dict(zip(reversed(doc_ids), reversed(titles)))  # the first title of each id wins
    ids = list(dict.fromkeys(doc_ids))
    rng = np.random.default_rng([seed, 0, 1])
    pick, when = rng.random((3, len(ids))), rng.random((3, len(ids)))
    word = rng.integers(0, len(EDIT_WORDS), len(ids))
    later = days - 1
    launched = (pick[0] < params.catalog_launch_share) & (later > 0)
    launch = np.where(launched, 1 + np.floor(when[0] * later), 0).astype(np.int64)
    span = later - launch  # days after the launch
    retire = np.where((pick[1] < params.catalog_retire_share) & (span > 0), launch + 1 + np.floor(when[1] * span), -1)
    end = np.where(retire >= 0, retire, days)
    between = end - launch - 1  # days after the launch and before the retirement
    edit = np.where((pick[2] < params.catalog_edit_share) & (between > 0), launch + 1 + np.floor(when[2] * between), -1)
    return CatalogPlan(ids, [first[i] for i in ids], launch, edit.astype(np.int64), retire.astype(np.int64), word)


def write_catalog_feed(store: Store, plan: CatalogPlan, start: dt.date, days: int, fmt: str) -> dict[str, Any]:
    """Replace each day's ``landing/catalog/dt=D/`` with its file (none on a day without change); files and counts."""
    written = []
    for offset in range(days):
        prefix = catalog_landing_prefix(start + dt.timedelta(days=offset))
        rows = plan.rows(offset)
        name = f"{SNAPSHOT_PREFIX}.{fmt}" if offset == 0 else f"delta.{fmt}"
        keep = f"{prefix}/{name}" if rows else None
        if keep is not None:
            written.append(store.write_bytes(keep, encode_catalog(rows, fmt, with_op=offset > 0)))
        for stale in store.list_files(prefix):
            if stale != keep:
                store.delete(stale)
    return {"catalog_files": written, "catalog_counts": plan.counts()}


def encode_catalog(rows: list[Row], fmt: str, with_op: bool) -> bytes:
    """The bytes of one catalogue file (``op`` column only in a delta; a retirement has no title)."""
    names = ("product_id", "title", "op") if with_op else ("product_id", "title")
    if fmt == "jsonl":
        records = ({k: v for k, v in zip(names, row) if v is not None} for row in rows)
        return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records).encode("utf-8")
    if fmt == "parquet":
        sink = io.BytesIO()
        table = pa.table({k: pa.array([row[n] for row in rows], pa.string()) for n, k in enumerate(names)})
        pq.write_table(table, sink, compression="zstd")
        return sink.getvalue()
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    writer.writerow(names)
    writer.writerows([["" if v is None else v for v in row[: len(names)]] for row in rows])
    return out.getvalue().encode("utf-8")
