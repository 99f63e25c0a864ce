"""Negative sampling: n unclicked titles per clicked pair, random (the paper's Fig. 3) or from the log.

Sources (``featurize --negative-source``): ``random`` (default, the paper's and Table IV's),
``skipped`` (all n from the titles the log showed for the query and nobody clicked, tier 1 first:
above or directly below the click; see :mod:`pipeline.features.skipped`), ``mixed`` (n // 2 skipped, the
rest random), and ``bm25`` / ``ann`` (n // 2 from the titles mined for the query by BM25 or by the
previous champion's index, never clicked for it anywhere in the log, the rest random; see
``encoders.search.mining``; they are drawn like skipped titles and counted as ``skipped_negatives``). When a pair has fewer skipped titles than its quota, random titles fill the gap and the
fill is counted (``random_fill``, ``rows_filled`` in the features manifest).

The pool is the distinct titles of one split (the training titles for training pairs). A
title is identified by its text, so a product listed under two ids is still one title; its
negative ``doc_id`` is the smallest id carrying that text. For a pair (q, d+), every negative
is drawn uniformly from the pool, never equal to d+ or to any other title clicked for q (in
any split), and the n negatives of a pair are distinct. Draws are vectorised rejection
sampling from a generator seeded by (seed, split, partition), so a partition's negatives
depend only on its rows and the seed, never on how many Dask workers ran it.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.defaults import NEGATIVE_SOURCES
from pipeline.core.errors import ConfigError

if TYPE_CHECKING:
    from pipeline.features.skipped import SkipIndex

_MAX_ROUNDS = 1000
RANDOM, SKIPPED, MIXED = NEGATIVE_SOURCES[:3]
#: counts of a draw (summed into the features manifest): negatives by origin, and the random fills of short rows
DRAW_STATS = ("random_negatives", "skipped_negatives", "near_click_negatives", "random_fill", "rows_filled")


def partition_rng(seed: int, split: str, partition: int) -> np.random.Generator:
    """The generator of one partition: a function of the seed, the split name and the index only."""
    return np.random.default_rng([int(seed), zlib.crc32(split.encode("utf-8")), int(partition)])


@dataclass(frozen=True)
class TitlePool:
    """Candidate negatives and what was clicked for which query.

    Attributes:
        titles: distinct pool titles, sorted.
        doc_ids: representative doc id of each pool title (the smallest one).
        queries: distinct queries with at least one click, sorted.
        clicked: sorted keys ``query_code * len(titles) + title_code`` of every clicked pair.
        clicked_per_query: number of distinct pool titles clicked for each query.
    """

    titles: pa.Array
    doc_ids: pa.Array
    queries: pa.Array
    clicked: np.ndarray
    clicked_per_query: np.ndarray

    @classmethod
    def build(cls, pool_pairs: pa.Table, clicked_pairs: pa.Table) -> "TitlePool":
        """Pool = distinct titles of ``pool_pairs``; exclusions = every (query, title) in ``clicked_pairs``."""
        by_title = pool_pairs.group_by("title").aggregate([("doc_id", "min")]).sort_by("title")
        titles, doc_ids = by_title["title"].combine_chunks(), by_title["doc_id_min"].combine_chunks()
        queries = pc.unique(clicked_pairs["query"]).sort()
        q_codes = pc.index_in(clicked_pairs["query"], value_set=queries).to_numpy(zero_copy_only=False)
        t_codes = pc.index_in(clicked_pairs["title"], value_set=titles).fill_null(-1)
        t_codes = t_codes.to_numpy(zero_copy_only=False)
        in_pool = t_codes >= 0
        keys = np.unique(q_codes[in_pool].astype(np.int64) * len(titles) + t_codes[in_pool])
        per_query = np.bincount(keys // max(len(titles), 1), minlength=len(queries))
        return cls(titles, doc_ids, queries, keys, per_query)

    @property
    def size(self) -> int:
        """Number of distinct titles in the pool."""
        return len(self.titles)

    def codes(self, queries: pa.Array) -> np.ndarray:
        """Query codes (-1 for a query with no recorded click)."""
        return pc.index_in(queries, value_set=self.queries).fill_null(-1).to_numpy(zero_copy_only=False)

    def title_codes(self, titles: pa.Array) -> np.ndarray:
        """Pool index of each title (-1 when not in the pool)."""
        return pc.index_in(titles, value_set=self.titles).fill_null(-1).to_numpy(zero_copy_only=False)

    def is_clicked(self, query_codes: np.ndarray, title_codes: np.ndarray) -> np.ndarray:
        """True where the title was clicked for the query."""
        keys = query_codes.astype(np.int64) * self.size + title_codes
        if self.clicked.size == 0:
            return np.zeros(keys.shape, dtype=bool)
        at = np.minimum(np.searchsorted(self.clicked, keys), self.clicked.size - 1)
        return (self.clicked[at] == keys) & (query_codes >= 0)

    def short_rows(self, queries: pa.Array, n: int) -> np.ndarray:
        """Rows whose query leaves fewer than ``n`` unclicked pool titles (sampling would be impossible)."""
        codes = self.codes(queries)
        blocked = np.where(codes >= 0, self.clicked_per_query[np.maximum(codes, 0)], 0)
        return np.flatnonzero(self.size - blocked < n)

    def sample(self, queries: pa.Array, n: int, rng: np.random.Generator) -> np.ndarray:
        """``[len(queries), n]`` pool indices: distinct per row, never clicked for the row's query."""
        if n < 0 or self.short_rows(queries, n).size:
            raise ValueError(f"cannot draw {n} negatives for every row from a pool of {self.size} titles")
        codes = self.codes(queries)
        out = np.full((len(codes), n), -1, dtype=np.int64)
        filled = np.zeros(len(codes), dtype=np.int64)
        pending = np.arange(len(codes)) if n else np.arange(0)
        for _ in range(_MAX_ROUNDS):
            if pending.size == 0:
                return out
            draws = rng.integers(0, self.size, size=(pending.size, n + 2))
            for j in range(draws.shape[1]):
                cand = draws[:, j]
                ok = (filled[pending] < n) & ~self.is_clicked(codes[pending], cand)
                ok &= ~(out[pending] == cand[:, None]).any(axis=1)
                rows = pending[ok]
                out[rows, filled[rows]] = cand[ok]
                filled[rows] += 1
            pending = pending[filled[pending] < n]
        raise RuntimeError(f"negative sampling did not finish in {_MAX_ROUNDS} rounds")


def skipped_quota(source: str, n: int) -> int:
    """How many of a pair's ``n`` negatives should come from the log's skipped titles."""
    return {RANDOM: 0, SKIPPED: n}.get(source, n // 2)


def check_negative_source(source: str, n: int) -> None:
    """A ConfigError when ``source`` is unknown, or when its quota would make it another source (mixed with n < 2)."""
    if source not in NEGATIVE_SOURCES:
        raise ConfigError(f"negative source must be one of {', '.join(NEGATIVE_SOURCES)}, got {source!r}")
    if source not in (RANDOM, SKIPPED) and n < 2:
        raise ConfigError(f"negative source {source} takes n // 2 titles from its list and the rest random, so it needs n >= 2 "
                          f"(got n = {n}, which would be all random: use random or skipped)")


@dataclass
class NegativeDraw:
    """The negatives of a partition, row-major (``rows * n``), and where they came from.

    ``from_log[r, j]`` is True where negative j of row r is a skipped title of the log.
    """

    titles: pa.Array
    doc_ids: pa.Array
    from_log: np.ndarray
    stats: dict[str, int] = field(default_factory=dict)


def draw_negatives(rows: pa.Table, n: int, source: str, pool: TitlePool, skips: "SkipIndex | None",
                   rng: np.random.Generator) -> NegativeDraw:
    """``n`` negatives per row of (query, doc_id, title) by ``source``; deterministic for ``rng``'s seed."""
    randoms = pool.sample(rows["query"], n, rng)
    quota = skipped_quota(source, n)
    if quota == 0 or skips is None:
        if quota:
            raise ValueError(f"negative source {source!r} needs the skipped titles of the split")
        flat = pa.array(randoms.ravel())
        return NegativeDraw(pool.titles.take(flat), pool.doc_ids.take(flat), np.zeros(randoms.shape, bool),
                            {**dict.fromkeys(DRAW_STATS, 0), "random_negatives": int(randoms.size)})
    titles: list[str] = []
    doc_ids: list[str] = []
    from_log = np.zeros(randoms.shape, dtype=bool)
    stats = dict.fromkeys(DRAW_STATS, 0)
    pool_titles, pool_ids = pool.titles.to_pylist(), pool.doc_ids.to_pylist()
    for r, (query, doc, title) in enumerate(zip(rows["query"].to_pylist(), rows["doc_id"].to_pylist(),
                                                rows["title"].to_pylist())):
        picked, near = skips.pick(query, doc, title, quota, rng)
        chosen = [skips.titles[c] for c in picked]
        taken = set(chosen)
        fill = [c for c in randoms[r].tolist() if pool_titles[c] not in taken][: n - len(picked)]
        titles += chosen + [pool_titles[c] for c in fill]
        doc_ids += [skips.doc_ids[c] for c in picked] + [pool_ids[c] for c in fill]
        from_log[r, : len(picked)] = True
        stats["skipped_negatives"] += len(picked)
        stats["near_click_negatives"] += near
        stats["random_negatives"] += len(fill)
        stats["random_fill"] += quota - len(picked)
        stats["rows_filled"] += int(len(picked) < quota)
    return NegativeDraw(pa.array(titles, pa.string()), pa.array(doc_ids, pa.string()), from_log, stats)
