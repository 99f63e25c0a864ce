"""Click statistics of an impression log, to judge a simulated log against a real one.

A *query* here is one issued search (an impression): "clicks per query" is the mean number of
clicked results per search, counting a result once however often it was clicked (the TREC log
records repeat clicks; landing rows hold one clicked flag per shown result).
"""
from __future__ import annotations

import copy
import datetime as dt
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.ingest.formats.trec_xml import read_trec_xml

MAX_POSITION = 10  # positions above this are pooled as "11+"
GRADE_NAMES = ("Bad", "Fair", "Good", "Excellent")


def click_stats(table: pa.Table) -> dict[str, Any]:
    """Stats of a table with ``impression_id``, ``position``, ``clicked`` (and optional ``grade``).

    Returns counts, clicks per query (mean and distribution), the no-click share, the share of
    clicks at each position, the CTR at each position and, when grades are known, CTR by grade.
    """
    _, impression = np.unique(table.column("impression_id").to_numpy(zero_copy_only=False), return_inverse=True)
    position = table.column("position").to_numpy(zero_copy_only=False).astype(np.int64)
    clicked = table.column("clicked").to_numpy(zero_copy_only=False).astype(bool)
    impressions = int(impression.max()) + 1 if impression.size else 0
    per_impression = np.bincount(impression, weights=clicked, minlength=impressions)
    clicks = int(clicked.sum())
    buckets = np.minimum(position, MAX_POSITION + 1)
    shown_at = np.bincount(buckets, minlength=MAX_POSITION + 2)[1:]
    clicks_at = np.bincount(buckets, weights=clicked, minlength=MAX_POSITION + 2)[1:]
    labels = [str(p) for p in range(1, MAX_POSITION + 1)] + [f"{MAX_POSITION + 1}+"]
    stats: dict[str, Any] = {
        "impressions": impressions,
        "results_shown": int(position.size),
        "clicks": clicks,
        "results_per_query": _ratio(position.size, impressions),
        "clicks_per_query": _ratio(clicks, impressions),
        "no_click_share": _ratio(int((per_impression == 0).sum()), impressions),
        "clicks_per_query_dist": _distribution(per_impression.astype(np.int64), impressions),
        "click_position_share": {k: _ratio(c, clicks) for k, c in zip(labels, clicks_at)},
        "ctr_by_position": {k: _ratio(c, n) for k, c, n in zip(labels, clicks_at, shown_at) if n},
        "ctr_by_grade": {},
    }
    if "grade" in table.column_names:
        grade = table.column("grade").to_numpy(zero_copy_only=False).astype(np.int64)
        for g, name in enumerate(GRADE_NAMES):
            shown = int((grade == g).sum())
            if shown:
                stats["ctr_by_grade"][f"{g} {name}"] = _ratio(int(clicked[grade == g].sum()), shown)
    return stats


def _distribution(per_impression: np.ndarray, impressions: int) -> dict[str, float]:
    counts = np.bincount(np.minimum(per_impression, 4), minlength=5)
    return {("4+" if k == 4 else str(k)): _ratio(int(c), impressions) for k, c in enumerate(counts)}


def _ratio(numerator: float, denominator: float) -> float:
    return round(float(numerator) / denominator, 4) if denominator else 0.0


def format_comparison(columns: dict[str, dict[str, Any] | None]) -> str:
    """A small text table of the stats side by side (one column per named log; None = n/a)."""
    names = list(columns)
    rows: list[tuple[str, list[str]]] = []

    def add(label: str, pick: Any, fmt: str = "{:.3f}") -> None:
        cells = []
        for name in names:
            stats = columns[name]
            value = pick(stats) if stats is not None else None
            cells.append("n/a" if value is None else fmt.format(value))
        rows.append((label, cells))

    add("searches (impressions)", lambda s: s["impressions"], "{:,}")
    add("results shown per search", lambda s: s["results_per_query"], "{:.2f}")
    add("clicks per query", lambda s: s["clicks_per_query"])
    add("searches with no click", lambda s: s["no_click_share"])
    for k in ("1", "2", "3", "4+"):
        add(f"searches with {k} click(s)", lambda s, k=k: s["clicks_per_query_dist"].get(k))
    for label in [str(p) for p in range(1, MAX_POSITION + 1)] + [f"{MAX_POSITION + 1}+"]:
        add(f"share of clicks at rank {label}", lambda s, k=label: s["click_position_share"].get(k))
    for label in ("1", "2", "3", "5", "10"):
        add(f"CTR at rank {label}", lambda s, k=label: s["ctr_by_position"].get(k))
    for g, name in enumerate(GRADE_NAMES):
        add(f"CTR of grade {g} ({name})", lambda s, k=f"{g} {name}": s["ctr_by_grade"].get(k))
    width = max(len(label) for label, _ in rows)
    cell = max(12, *(len(n) for n in names))
    lines = [f"{'click statistics':<{width}}  " + "  ".join(f"{n:>{cell}}" for n in names)]
    lines += [f"{label:<{width}}  " + "  ".join(f"{c:>{cell}}" for c in cells) for label, cells in rows]
    return "\n".join(lines)


def trec_session_stats(path: Path) -> dict[str, Any] | None:
    """:func:`click_stats` of the real TREC Session log at ``path`` (None when it is absent).

    Every shown result counts, including the few with an empty title that ingestion quarantines.
    """
    if not path.exists():
        return None
    stat = path.stat()
    return copy.deepcopy(_trec_stats(str(path), stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=2)
def _trec_stats(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """Cached per file version (path, mtime, size)."""
    rows = [r.values for r in read_trec_xml(Path(path).read_bytes(), path, dt.date(2013, 1, 1)) if r.values]
    return click_stats(
        pa.table(
            {
                "impression_id": [r["impression_id"] for r in rows],
                "position": [int(r["position"]) for r in rows],
                "clicked": [bool(r["clicked"]) for r in rows],
            }
        )
    )
