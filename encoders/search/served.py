"""The choice of a served index's default mode on held-out clicks (the modes themselves: :mod:`encoders.search.modes`).

``deepsent index`` measures Recall@10 of every mode on the held-out click queries featurize drew
(:func:`pipeline.features.click_lists.held_out_clicks`: queries that never reached training, their clicked titles as
the relevant ones) over the whole indexed corpus and writes
the best mode into the index manifest as the default (:func:`choose_default_mode`), with the linear weight fitted
on the other half of those queries; no judged set is read.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from encoders.search.fusion import WEIGHT_GRID
from encoders.search.modes import MODES

Search = Callable[[list[str], int, str, float], list[list[str]]]


def query_recall(found: list[str], clicked: set[str]) -> float:
    """The share of one query's ``clicked`` doc ids that its ``found`` ones hold."""
    return len(set(found) & clicked) / len(clicked)


def recall_at(search: Search, clicks: dict[str, set[str]], mode: str, k: int, weight: float = 0.5) -> float:
    """Mean Recall@``k`` of ``mode`` over the queries of ``clicks`` (query -> clicked doc ids)."""
    queries = list(clicks)
    found = search(queries, k, mode, weight)
    return float(np.mean([query_recall(ids, clicks[q]) for q, ids in zip(queries, found)]))


def halves(clicks: dict[str, set[str]]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The held-out ``clicks`` split in two: the first half fits the linear weight, the second judges the modes."""
    queries = list(clicks)
    middle = len(queries) // 2
    return {q: clicks[q] for q in queries[:middle]}, {q: clicks[q] for q in queries[middle:]}


def memoized(search: Search) -> Search:
    """``search`` that answers a repeated (queries, k, mode, weight) from memory (the gate re-reads the chosen mode)."""
    answers: dict[tuple[Any, ...], list[list[str]]] = {}

    def remembered(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        key = (tuple(asked), k, mode, weight)
        if key not in answers:
            answers[key] = search(asked, k, mode, weight)
        return answers[key]

    return remembered


def fit_linear_weight_by_recall(search: Search, clicks: dict[str, set[str]], k: int = 10) -> float:
    """The cosine's share in ``linear`` (of the fusions' one grid, :data:`encoders.search.fusion.WEIGHT_GRID`) with
    the best Recall@``k`` on ``clicks``; ties go to the weight nearest 0.5; 0.5 when there are no clicks."""
    if not clicks:
        return 0.5
    by_weight = {w: recall_at(search, clicks, "linear", k, w) for w in WEIGHT_GRID}
    return max(WEIGHT_GRID, key=lambda w: (round(by_weight[w], 6), -abs(w - 0.5)))


def choose_default_mode(search: Search, clicks: dict[str, set[str]], k: int = 10) -> dict[str, Any]:
    """The linear weight fitted on the first half of the held-out ``clicks``, Recall@``k`` of every mode on the
    other half, and the best mode (``dense`` when there are no held-out clicks; ties: the first of :data:`MODES`)."""
    if len(clicks) < 2:
        return {"default_mode": "dense", "chosen_on": "no held-out clicks", "queries": 0, f"recall_at_{k}": {}}
    fit, judge = halves(clicks)
    weight = fit_linear_weight_by_recall(search, fit, k)
    recall = {mode: recall_at(search, judge, mode, k, weight) for mode in MODES}
    best = max(MODES, key=lambda mode: (round(recall[mode], 6), -MODES.index(mode)))
    return {"default_mode": best, "linear_weight": weight,
            "chosen_on": "held-out click pairs (pairs/valid.parquet): linear weight on one half, modes on the other",
            "queries": len(judge), "weight_queries": len(fit), f"recall_at_{k}": {m: round(v, 4) for m, v in recall.items()}}
