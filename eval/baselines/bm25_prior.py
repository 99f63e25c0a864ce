"""BM25 with a click prior: what a search team without deepsent runs, a row of ``deepsent compare --retrieval``.

A product's popularity is its clicks in the training click pairs (``pairs/train.parquet``, the ``clicks`` column
summed per ``doc_id``; the held-out ``pairs/valid.parquet`` is never counted), and its prior is
``log(1 + clicks) / log(1 + the most clicks of any product)``, in [0, 1], 0 for a product never clicked. A query's
candidates are BM25's top :data:`encoders.search.modes.DEPTH` (positive scores, as served), ranked by
``(1 - w)·BM25 + w·prior`` with BM25 min-max scaled within the candidates (ties: the lower corpus row). ``w`` is the
grid weight (:data:`encoders.search.fusion.WEIGHT_GRID`) with the best Recall@10 on the first half of the held-out
click queries (:func:`pipeline.features.click_lists.held_out_clicks` and :func:`~encoders.search.served.halves`: the
queries and measure the served linear weight is fitted by), ties to the smaller weight: ``w = 0`` is BM25 itself, so
the prior has to earn its weight. No judged query reaches the fit. The row is measured on the judged set's cold and
warm queries too (:func:`eval.retrieval.metrics.query_splits`). Not a re-ranking baseline of ``deepsent compare``
(it declares no ``SPEC``): it ranks corpus rows by their products' clicks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from encoders.search.fusion import WEIGHT_GRID
from encoders.search.modes import DEPTH, best, min_max
from encoders.search.served import halves, recall_at
from eval.judgments import JudgedSet
from eval.report import BETTER, WORSE, metric_header
from eval.retrieval.metrics import RetrievalResult, metric_names, query_splits, versus
from eval.retrieval.served import Lexical, SystemRun, is_served_default, latency_ms, lexical_candidates
from eval.significance import ALPHA
from pipeline.text.textnorm import normalize

TRAIN_PAIRS = "pairs/train.parquet"
PRIOR_KEY = "bm25+prior"
PRIOR_LABEL = "BM25 + click prior"
FIT_K = 10


def click_counts(store: Any) -> dict[str, int]:
    """Clicks per doc_id in the training click pairs (``pairs/train.parquet``); empty when the store has none."""
    if not store.exists(TRAIN_PAIRS):
        return {}
    table = store.read_table(TRAIN_PAIRS, columns=["doc_id", "clicks"])
    counts: dict[str, int] = {}
    for doc, clicks in zip(table["doc_id"].to_pylist(), table["clicks"].to_pylist()):
        counts[doc] = counts.get(doc, 0) + int(clicks)
    return counts


def click_prior(counts: dict[str, int], doc_ids: Sequence[str]) -> np.ndarray:
    """Each doc id's ``log(1 + clicks) / log(1 + max clicks)`` (0 when never clicked; all 0 without clicks)."""
    most = max(counts.values(), default=0)
    clicks = np.fromiter((counts.get(doc, 0) for doc in doc_ids), dtype=np.float64, count=len(doc_ids))
    return np.log1p(clicks) / np.log1p(most) if most > 0 else np.zeros(len(doc_ids))


def prior_ranking(top: Sequence[tuple[int, float]], prior: np.ndarray, weight: float) -> list[int]:
    """The rows of BM25's candidates ``top`` ((row, score) pairs) by ``(1 - w)·min-max BM25 + w·prior``."""
    if not top:
        return []
    rows = [row for row, _ in top]
    scores = (1 - weight) * min_max(np.array([score for _, score in top])) + weight * prior[rows]
    return [row for row, _ in best(rows, scores, len(rows))]


@dataclass(frozen=True)
class PriorFit:
    """The fitted prior weight, the held-out click queries it was fitted on, and Recall@10 at every grid weight."""

    weight: float
    queries: int
    recall: dict[float, float] = field(default_factory=dict)


def fit_prior_weight(bm25: Any, prior: np.ndarray, doc_ids: Sequence[str], clicks: dict[str, set[str]]) -> PriorFit:
    """The grid weight with the best Recall@10 on held-out ``clicks`` (the caller's first half), ties to the smaller
    weight; 0 (BM25 alone) when there are none."""
    if not clicks:
        return PriorFit(0.0, 0)
    queries = list(clicks)
    tops = dict(zip(queries, lexical_candidates(bm25, [normalize(q) for q in queries]).top))

    def search(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        return [[doc_ids[row] for row in prior_ranking(tops[q], prior, weight)[:k]] for q in asked]

    recall = {w: recall_at(search, clicks, PRIOR_KEY, FIT_K, w) for w in WEIGHT_GRID}
    return PriorFit(max(WEIGHT_GRID, key=lambda w: (round(recall[w], 6), -w)), len(queries), recall)


def prior_run(found: Lexical, prior: np.ndarray, fit: PriorFit, evaluate: Callable[[np.ndarray], RetrievalResult],
              clicked_products: int) -> SystemRun:
    """The BM25 + click prior row over the judged queries' BM25 candidates ``found``; latency = BM25's scoring plus
    the re-scoring, per query."""
    ranked = np.full((len(found.top), DEPTH), -1, dtype=np.int64)
    seconds = found.seconds.copy()
    for q, top in enumerate(found.top):
        began = time.perf_counter()
        rows = prior_ranking(top, prior, fit.weight)
        seconds[q] += time.perf_counter() - began
        ranked[q, :len(rows)] = rows
    settings = (f"(1-w)·BM25 + w·log(1+clicks)/log(1+max) over BM25's top {DEPTH}, w={fit.weight:.2f} by Recall@{FIT_K} "
                f"on {fit.queries} held-out click queries; {clicked_products:,} products clicked in training")
    details = {"mode": PRIOR_KEY, "prior_weight": fit.weight, "settings": settings, "latency": latency_ms(seconds),
               "seconds": float(seconds.sum()), "prior_fit": {"queries": fit.queries, "recall@10": fit.recall}}
    return SystemRun(PRIOR_KEY, PRIOR_LABEL, "baseline", evaluate(ranked), details)


def click_prior_run(store: Any, bm25: Any, doc_ids: Sequence[str], found: Lexical, clicks: dict[str, set[str]],
                    evaluate: Callable[[np.ndarray], RetrievalResult]) -> tuple[dict[str, int], SystemRun | None]:
    """The training clicks per product and the BM25 + click prior row, its weight fitted on the first half of the
    held-out ``clicks`` (None when the store has no training clicks: there is no prior to add)."""
    counts = click_counts(store)
    if not counts:
        return counts, None
    prior = click_prior(counts, doc_ids)
    return counts, prior_run(found, prior, fit_prior_weight(bm25, prior, doc_ids, halves(clicks)[0]), evaluate, len(counts))


def split_rows(runs: Sequence[SystemRun], splits: dict[str, np.ndarray], references: dict[str, SystemRun],
               seed: int) -> dict[str, Any]:
    """Per split: its query count and every run's mean of each metric, tested against each of ``references``
    (name -> run; the run itself is not tested against itself)."""
    out: dict[str, Any] = {}
    for split, mask in splits.items():
        rows = []
        for run in runs:
            row: dict[str, Any] = {"key": run.key, "name": run.name, "mode": run.details.get("mode", "dense"),
                                   "served_default": is_served_default(run)}
            for metric in metric_names():
                values = run.result.per_query[metric][mask]
                row[metric] = float(values.mean()) if values.size else None
            row.update({name: {m: versus(run.result, other.result, m, seed, mask) for m in metric_names()}
                        for name, other in references.items() if run is not other})
            rows.append(row)
        out[split] = {"queries": int(mask.sum()), "rows": rows}
    return out


def cold_start_report(runs: Sequence[SystemRun], judged: JudgedSet, counts: dict[str, int], bm25: SystemRun,
                      prior: SystemRun, seed: int) -> dict[str, Any]:
    """What the cold/warm table shows: how the prior was fitted (Recall@10 at every grid weight) and every run on each
    split, tested against BM25 (``vs_bm25``) and against this row (``vs_prior``)."""
    fit = prior.details["prior_fit"]
    splits = split_rows(runs, query_splits(judged, counts), {"vs_bm25": bm25, "vs_prior": prior}, seed)
    return {"prior": {"weight": prior.details["prior_weight"], "queries": fit["queries"], "clicked_products": len(counts),
                      "recall@10_by_weight": {f"{w:.2f}": value for w, value in fit["recall@10"].items()}},
            "splits": splits}


def cold_start_caption(cold_start: dict[str, Any]) -> str:
    """The cold/warm table's caption: how the splits and the prior were made, what the columns test."""
    fit = cold_start["prior"]
    names = " / ".join(metric_header(m) for m in metric_names())
    return (f"Cold start: the judged queries whose relevant products (grade > 0) were never clicked in the training "
            f"pairs (cold) and the rest (warm), query counts in brackets. {PRIOR_LABEL}: (1-w)·BM25 + "
            f"w·log(1+clicks)/log(1+max clicks) over BM25's top {DEPTH} (BM25 min-max scaled within them), "
            f"w = {fit['weight']:.2f} of the grid 0, 0.05, ..., 1 by Recall@{FIT_K} on {fit['queries']} held-out "
            f"click queries (ties to the smaller w); {fit['clicked_products']:,} products have a training click. "
            f"'vs' columns: the difference in points at {names} within the split, {BETTER}/{WORSE} significant "
            f"(paired t-test over the split's queries, p < {ALPHA}).")
