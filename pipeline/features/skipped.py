"""Skipped titles: what the click log shows for a query and nobody clicked (hard negatives).

``deepsent pairs`` keeps, besides the clicked pairs, every title that was shown for a query and
never clicked for it, in two tiers (``skipped/{train,valid}.parquet``, SKIPPED_SCHEMA):

* tier 1 (``NEAR_CLICK``), per clicked pair (q, d+): titles shown *above* d+ or *directly below*
  it (position p+1) in an impression where d+ was clicked at position p (Joachims' skip-above and
  skip-next: the user saw them and preferred d+);
* tier 2 (``SHOWN``), per query: every title shown in any impression of q (``clicked_doc_id`` "").

Tier 1 is found within one ``clicks/dt=D/`` partition (an impression is logged on one day); tier 2
counts add up over partitions. A (query, title) clicked anywhere in the log is never a skipped
title of that query. Rows are split
train/valid by the same query hash as the pairs, so a validation query's impressions never give a
training negative. :class:`SkipIndex` answers "the skipped titles of this pair, best tier first".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pipeline.storage.locations import LOCATIONS

SKIPPED_ROOT = LOCATIONS["pairs"][1]
NEAR_CLICK, SHOWN = 1, 2
_KEYS = ["query", "clicked_doc_id", "doc_id", "title", "tier"]


def skipped_in_partition(table: pa.Table) -> pa.Table:
    """One partition's shown-not-clicked rows as (query, clicked_doc_id, doc_id, title, tier, shown) counts."""
    clicked = pc.fill_null(table["clicked"], False)
    unclicked = table.filter(pc.invert(clicked)).select(["impression_id", "query", "doc_id", "title", "position"])
    clicks = table.filter(clicked).select(["impression_id", "position", "doc_id"]).rename_columns(
        ["impression_id", "click_position", "clicked_doc_id"])
    joined = unclicked.join(clicks, "impression_id", join_type="inner", use_threads=False)
    pos, click_pos = joined["position"], joined["click_position"]
    near = pc.or_(pc.less(pos, click_pos), pc.equal(pos, pc.add(click_pos, 1)))
    near_rows = joined.filter(near).select(["query", "clicked_doc_id", "doc_id", "title"])
    shown_rows = unclicked.select(["query", "doc_id", "title"])
    shown_rows = shown_rows.append_column("clicked_doc_id", pa.array([""] * shown_rows.num_rows, pa.string()))
    parts = [_count(near_rows, NEAR_CLICK), _count(shown_rows.select(near_rows.column_names), SHOWN)]
    return pa.concat_tables(parts)


def _count(rows: pa.Table, tier: int) -> pa.Table:
    grouped = rows.group_by(["query", "clicked_doc_id", "doc_id", "title"], use_threads=False).aggregate(
        [("query", "count")])
    return pa.table({"query": grouped["query"], "clicked_doc_id": grouped["clicked_doc_id"],
                     "doc_id": grouped["doc_id"], "title": grouped["title"],
                     "tier": pa.array(np.full(grouped.num_rows, tier, np.int8)),
                     "shown": grouped["query_count"].cast(pa.int64())})


def combine_skipped(partials: Sequence[pa.Table], clicked_pairs: pa.Table) -> pa.Table:
    """Partition counts summed, minus every (query, title) or (query, doc_id) clicked anywhere; sorted."""
    total = pa.concat_tables(partials).group_by(_KEYS, use_threads=False).aggregate([("shown", "sum")])
    total = total.rename_columns([c if c != "shown_sum" else "shown" for c in total.column_names])
    sep = "\x1f"
    key_title = pc.binary_join_element_wise(total["query"], total["title"], sep)
    key_doc = pc.binary_join_element_wise(total["query"], total["doc_id"], sep)
    clicked_titles = pc.binary_join_element_wise(clicked_pairs["query"], clicked_pairs["title"], sep)
    clicked_docs = pc.binary_join_element_wise(clicked_pairs["query"], clicked_pairs["doc_id"], sep)
    keep = pc.invert(pc.or_(pc.is_in(key_title, value_set=clicked_titles), pc.is_in(key_doc, value_set=clicked_docs)))
    return total.filter(keep).select(_KEYS + ["shown"]).sort_by(
        [("query", "ascending"), ("tier", "ascending"), ("clicked_doc_id", "ascending"), ("title", "ascending"),
         ("doc_id", "ascending")])


@dataclass(frozen=True)
class SkipIndex:
    """The skipped titles of one split, ready to draw from (broadcast to the Dask workers).

    Attributes:
        titles: distinct skipped titles, sorted; a title is identified by its text.
        doc_ids: the smallest doc id shown with each title.
        near: (query, clicked doc id) -> title codes of tier 1, sorted.
        shown: query -> title codes of tier 2, sorted.
    """

    titles: list[str]
    doc_ids: list[str]
    near: dict[tuple[str, str], np.ndarray]
    shown: dict[str, np.ndarray]

    @classmethod
    def build(cls, skipped: pa.Table) -> "SkipIndex":
        """Index the rows of a skipped file (query, clicked_doc_id, doc_id, title, tier)."""
        by_title = skipped.group_by("title").aggregate([("doc_id", "min")]).sort_by("title")
        titles = by_title["title"].to_pylist()
        codes = pc.index_in(skipped["title"], value_set=by_title["title"]).to_numpy(zero_copy_only=False)
        near: dict[tuple[str, str], set[int]] = {}
        shown: dict[str, set[int]] = {}
        for query, clicked_doc, tier, code in zip(skipped["query"].to_pylist(), skipped["clicked_doc_id"].to_pylist(),
                                                  skipped["tier"].to_pylist(), codes.tolist()):
            if tier == NEAR_CLICK:
                near.setdefault((query, clicked_doc), set()).add(code)
            else:
                shown.setdefault(query, set()).add(code)
        as_arrays = lambda d: {k: np.array(sorted(v), dtype=np.int64) for k, v in d.items()}  # noqa: E731
        return cls(titles, by_title["doc_id_min"].to_pylist(), as_arrays(near), as_arrays(shown))

    def pick(self, query: str, clicked_doc: str, clicked_title: str, k: int,
             rng: np.random.Generator) -> tuple[list[int], int]:
        """Up to ``k`` distinct title codes skipped for the pair, tier 1 first (random order within a tier).

        Returns the codes and how many of them are tier 1. The clicked title itself is never picked.
        """
        empty = np.zeros(0, dtype=np.int64)
        near = self.near.get((query, clicked_doc), empty)
        shown = np.setdiff1d(self.shown.get(query, empty), near, assume_unique=True)
        picked = [int(c) for c in rng.permutation(near)] + [int(c) for c in rng.permutation(shown)]
        picked = [c for c in picked if self.titles[c] != clicked_title][:k]
        near_codes = set(near.tolist())
        return picked, sum(1 for c in picked if c in near_codes)
