"""The choice of a served index's default mode (the modes themselves: :mod:`encoders.search.modes`).

``deepsent index`` measures NDCG@10 of every mode over the whole indexed corpus on the decision's queries
(:class:`DecisionQueries`): the judged gate set's queries with their graded titles where a gate set is configured
(``eval.decisions``), else the held-out click queries featurize drew (:func:`pipeline.features.click_lists.held_out_clicks`:
queries that never reached training, their clicked titles relevant). The linear weight is fitted on one half of
those queries, the modes judged on the other, and a fused mode is served only when it beats the better single first
stage by more than the noise (:func:`choose_default_mode`). The reported judged set is never read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import numpy as np

from encoders.search.fusion import WEIGHT_GRID
from encoders.search.margins import paired_margin, simplest_near_best
from encoders.search.modes import MODES
from pipeline.core.defaults import SEED

#: The modes that are one first stage alone: the reference a fused mode must beat to be served.
SINGLE_STAGES = ("dense", "bm25")
V = TypeVar("V")

Search = Callable[[list[str], int, str, float], list[list[str]]]


def query_recall(found: list[str], clicked: set[str]) -> float:
    """The share of one query's ``clicked`` doc ids that its ``found`` ones hold."""
    return len(set(found) & clicked) / len(clicked)


def recall_at(search: Search, clicks: dict[str, set[str]], mode: str, k: int, weight: float = 0.5) -> float:
    """Mean Recall@``k`` of ``mode`` over the queries of ``clicks`` (query -> clicked doc ids)."""
    queries = list(clicks)
    found = search(queries, k, mode, weight)
    return float(np.mean([query_recall(ids, clicks[q]) for q, ids in zip(queries, found)]))


def halves(clicks: dict[str, V]) -> tuple[dict[str, V], dict[str, V]]:
    """The decision's queries (or held-out ``clicks``) split in two: the first half fits the linear weight, the second
    judges the modes."""
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


@dataclass(frozen=True)
class DecisionQueries:
    """The queries a served mode is chosen on, each with its relevant doc ids and their gains, and where they come
    from (``signal``): a judged gate set's graded titles, or the held-out clicks (gain 1)."""

    relevant: dict[str, dict[str, float]]
    signal: str

    @classmethod
    def of_clicks(cls, clicks: dict[str, set[str]]) -> "DecisionQueries":
        """The held-out click queries, each clicked doc id relevant with gain 1."""
        return cls({q: dict.fromkeys(sorted(docs), 1.0) for q, docs in clicks.items()},
                   f"{len(clicks):,} held-out click queries (pairs/valid.parquet)")

    def within(self, doc_ids: set[str]) -> "DecisionQueries":
        """Only the relevant docs among ``doc_ids`` (what the index serves), and only queries left with one."""
        kept = {q: {d: g for d, g in docs.items() if d in doc_ids} for q, docs in self.relevant.items()}
        return DecisionQueries({q: docs for q, docs in kept.items() if docs}, self.signal)


def query_ndcg(found: list[str], gains: dict[str, float], k: int = 10) -> float:
    """NDCG@``k`` of one ranked list of doc ids against its relevant docs' gains (others gain 0)."""
    dcg = sum(gains.get(doc, 0.0) / np.log2(rank + 2) for rank, doc in enumerate(found[:k]))
    ideal = sum(g / np.log2(rank + 2) for rank, g in enumerate(sorted(gains.values(), reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def per_query_ndcg(search: Search, relevant: dict[str, dict[str, float]], mode: str, k: int,
                   weight: float = 0.5) -> np.ndarray:
    """NDCG@``k`` of ``mode`` per query of ``relevant`` (query -> doc id -> gain), in its order."""
    queries = list(relevant)
    return np.array([query_ndcg(ids, relevant[q], k) for q, ids in zip(queries, search(queries, k, mode, weight))])


def fit_linear_weight(search: Search, relevant: dict[str, dict[str, float]], k: int = 10) -> float:
    """The cosine's share in ``linear`` on ``relevant``'s queries: of the weights within one standard error of the
    best NDCG@``k`` (:func:`~encoders.search.margins.simplest_near_best`), the nearest 0.5 (the plain even mix);
    0.5 with fewer than two queries."""
    if len(relevant) < 2:
        return 0.5
    weights = sorted(WEIGHT_GRID, key=lambda w: (abs(w - 0.5), w))  # the simplest first
    chosen, _ = simplest_near_best([per_query_ndcg(search, relevant, "linear", k, w) for w in weights])
    return weights[chosen]


def choose_default_mode(search: Search, decision: DecisionQueries, k: int = 10, seed: int = SEED) -> dict[str, Any]:
    """The linear weight fitted on the first half of the decision's queries (:func:`fit_linear_weight`), and the mode
    served by default, judged on the other half by NDCG@``k``: the better single first stage (``dense`` or ``bm25``)
    unless a fused mode beats it by a paired bootstrap CI above zero (:mod:`encoders.search.margins`); ``dense``
    when there are fewer than two queries."""
    relevant = decision.relevant
    if len(relevant) < 2:
        return {"default_mode": "dense", "chosen_on": "no decision queries", "queries": 0, f"ndcg_at_{k}": {}}
    fit, judge = halves(relevant)
    weight = fit_linear_weight(search, fit, k)
    ndcg = {mode: per_query_ndcg(search, judge, mode, k, weight) for mode in MODES}
    singles = [m for m in MODES if m in SINGLE_STAGES]
    reference = max(singles, key=lambda m: (round(float(ndcg[m].mean()), 6), -MODES.index(m)))
    fused = max((m for m in MODES if m not in SINGLE_STAGES), key=lambda m: (round(float(ndcg[m].mean()), 6),
                                                                            -MODES.index(m)))
    margin = paired_margin(ndcg[fused], ndcg[reference], seed)
    best = fused if margin.beats() else reference
    return {"default_mode": best, "linear_weight": weight, "reference_mode": reference, "best_fused_mode": fused,
            "margin": margin.to_dict(),
            "why": (f"{fused} {'beats' if margin.beats() else 'does not beat'} {reference} (the better single first "
                    f"stage) at NDCG@{k}: {margin.text()}"),
            "chosen_on": f"{decision.signal}: linear weight on one half, modes on the other",
            "queries": len(judge), "weight_queries": len(fit),
            f"ndcg_at_{k}": {m: round(float(v.mean()), 4) for m, v in ndcg.items()}}
