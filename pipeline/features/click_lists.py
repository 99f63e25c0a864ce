"""The held-out click pairs of a feature version as text: per valid pair, its clicked title and negatives.

Feature shards store trigram ids, not title text. :func:`valid_click_lists` therefore draws the
validation negatives again exactly as ``featurize`` drew them (same pairs file, same manifest
parameters, same seeded partitions), checks every drawn doc id against the ``neg_doc_ids`` of the
stored shards, and returns flat (query, title) candidate lists for scorers that work on text (BM25,
the weight of the linear baseline). Nothing here reads a judged set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.core.errors import DeepsentError
from pipeline.core.quarantine import Quarantine
from pipeline.core.store import Store
from pipeline.features.featurize import SPLITS, check_skipped, read_manifest, verify_split
from pipeline.features.negatives import RANDOM, TitlePool, draw_negatives, partition_rng
from pipeline.features.pair_check import check_pairs
from pipeline.features.shards import plan_shards
from pipeline.features.skipped import SkipIndex


@dataclass(frozen=True)
class ClickLists:
    """Flat candidate lists: ``group[i]`` is the valid pair of row i, ``clicked[i]`` marks its clicked title."""

    queries: list[str]
    titles: list[str]
    group: np.ndarray
    clicked: np.ndarray

    @property
    def num_groups(self) -> int:
        """Number of click pairs (one candidate list each)."""
        return int(self.group.max()) + 1 if self.group.size else 0


def valid_click_lists(store: Store, version: str) -> ClickLists:
    """The validation click pairs of features ``version``: clicked title first, then its n negatives."""
    manifest = read_manifest(store, version)
    params = manifest["params"]
    source, n, seed = params.get("negative_source", RANDOM), int(params["negatives"]), int(params["seed"])
    scratch = Quarantine("click-lists")  # featurize already reported these rows
    checked = {s: check_pairs(store, f"pairs/{s}.parquet", s, scratch) for s in SPLITS}
    if checked["valid"].sha256 != manifest["source"]["valid"]["sha256"]:
        raise DeepsentError(f"{store.uri('pairs/valid.parquet')}: changed since features {version} were built; "
                            "re-run featurize")
    pool = TitlePool.build(checked["valid"].clean, pa.concat_tables([checked[s].clean for s in SPLITS]))
    skips = SkipIndex.build(check_skipped(store, checked, scratch)["valid"].clean) if source != RANDOM else None
    verify_split(store, manifest, "valid")
    stored = store.read_table(f"features/{version}/valid", columns=["pair_id", "neg_doc_ids"])
    expected = dict(zip(stored["pair_id"].to_pylist(), stored["neg_doc_ids"].to_pylist()))
    queries: list[str] = []
    titles: list[str] = []
    for job in plan_shards("valid", checked["valid"].clean, seed, int(params["shard_rows"])):
        drawn = draw_negatives(job.rows, n, source, pool, skips, partition_rng(seed, "valid", job.index))
        negatives = np.array(drawn.titles.to_pylist(), dtype=object).reshape(job.rows.num_rows, n)
        doc_ids = np.array(drawn.doc_ids.to_pylist(), dtype=object).reshape(job.rows.num_rows, n)
        for pair_id, query, title, negs, ids in zip(job.rows["pair_id"].to_pylist(), job.rows["query"].to_pylist(),
                                                    job.rows["title"].to_pylist(), negatives, doc_ids):
            if expected.get(pair_id) != list(ids):
                raise DeepsentError(f"features {version}: valid pair {pair_id} has other negatives than the stored "
                                    "shards (features built by another release?)")
            queries += [query] * (n + 1)
            titles += [title, *negs]
    groups = np.repeat(np.arange(len(queries) // (n + 1)), n + 1)
    clicked = np.tile(np.array([True] + [False] * n), len(queries) // (n + 1))
    return ClickLists(queries, titles, groups, clicked)
