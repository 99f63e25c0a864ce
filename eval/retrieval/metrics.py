"""Retrieval metrics over a whole corpus: Recall@k and NDCG@k of each judged query's top titles.

A system returns, per judged query, the corpus rows of its top ``depth`` titles. A retrieved
title without a judgment for that query counts as not relevant (grade 0); it is never dropped,
so an unjudged title ranked first pushes the judged ones down. Recall@k is the share of the
query's positively graded titles found in its top k. NDCG@k is :func:`eval.metrics.ndcg_arrays`
(gain 2^grade - 1, ideal ordering from every judged title of the query, retrieved or not).
Queries without a positive grade are NaN and left out of means, as in the re-ranking table. The judged queries
split into cold and warm by their relevant products' clicks (:func:`query_splits`), and any two systems are compared
on all of them or on one split (:func:`versus`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from eval.judgments import JudgedSet
from eval.metrics import ndcg_arrays
from pipeline.core.errors import DeepsentError

RECALL_KS = (10, 100)
NDCG_K = 10


@dataclass(frozen=True)
class Qrels:
    """Grades of the judged (query, corpus row) pairs: parallel arrays, one entry per judged pair."""

    qid: np.ndarray
    row: np.ndarray
    label: np.ndarray
    num_queries: int


def qrels_of(judged: JudgedSet, row_of_doc: Mapping[str, int]) -> Qrels:
    """The judged set's grades keyed by corpus row (every judged doc_id must be in ``row_of_doc``)."""
    missing = [d for d in judged.doc_id if d not in row_of_doc]
    if missing:
        raise DeepsentError(f"{judged.source}: document {missing[0]!r} is not in the corpus ({len(missing)} such pairs)")
    rows = np.fromiter((row_of_doc[d] for d in judged.doc_id), dtype=np.int64, count=len(judged))
    return Qrels(qid=judged.qid.astype(np.int64), row=rows, label=judged.label.astype(np.int64),
                 num_queries=judged.num_queries)


@dataclass(frozen=True)
class RetrievalResult:
    """Per-query values of each metric (``recall@10``, ``ndcg@10``, ...), NaN for excluded queries."""

    per_query: dict[str, np.ndarray]
    excluded: np.ndarray

    def valid(self, metric: str) -> np.ndarray:
        """The metric on the evaluated queries in query order (the same queries for every system)."""
        keep = np.ones(self.per_query[metric].shape, dtype=bool)
        keep[self.excluded] = False
        return self.per_query[metric][keep]

    def mean(self, metric: str) -> float:
        """Mean of the metric over the queries that have a positive grade."""
        values = self.valid(metric)
        return float(values.mean()) if values.size else float("nan")


def metric_names(recall_ks: tuple[int, ...] = RECALL_KS, ndcg_k: int = NDCG_K) -> list[str]:
    """Names of the reported metrics, in table order."""
    return [f"recall@{k}" for k in recall_ks] + [f"ndcg@{ndcg_k}"]


def _retrieved_labels(ranked: np.ndarray, qrels: Qrels, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """For every retrieved entry its grade (0 when unjudged), and for every judged pair its rank (-1 if not retrieved)."""
    queries, depth = ranked.shape
    judged_key = qrels.qid * num_rows + qrels.row
    retrieved_key = (np.arange(queries)[:, None] * num_rows + ranked).ravel()
    order = np.argsort(judged_key)
    sorted_keys = judged_key[order]
    at = np.minimum(np.searchsorted(sorted_keys, retrieved_key), len(sorted_keys) - 1)
    hit = (sorted_keys[at] == retrieved_key) & (ranked.ravel() >= 0)
    labels = np.where(hit, qrels.label[order][at], 0)
    rank_of_pair = np.full(len(judged_key), -1, dtype=np.int64)
    rank_of_pair[order[at[hit]]] = np.flatnonzero(hit) % depth
    return labels.reshape(queries, depth), rank_of_pair


def evaluate_rankings(ranked: np.ndarray, qrels: Qrels, num_rows: int, recall_ks: tuple[int, ...] = RECALL_KS,
                      ndcg_k: int = NDCG_K) -> RetrievalResult:
    """Recall@k and NDCG@k of ``ranked`` ((queries, depth) corpus rows, best first, -1 padding) against ``qrels``."""
    ranked = np.asarray(ranked, dtype=np.int64)
    if ranked.ndim != 2 or ranked.shape[0] != qrels.num_queries:
        raise DeepsentError(f"expected rankings of {qrels.num_queries} queries, got shape {ranked.shape}")
    depth = ranked.shape[1]
    if max(*recall_ks, ndcg_k) > depth and depth < num_rows:
        raise DeepsentError(f"rankings of depth {depth} cannot give metrics at {max(*recall_ks, ndcg_k)}")
    rows_per_query = (ranked >= 0).sum(axis=1)
    if len(np.unique(ranked[ranked >= 0] + np.repeat(np.arange(len(ranked)), rows_per_query) * num_rows)) != rows_per_query.sum():
        raise DeepsentError("a ranking holds the same corpus row twice")
    labels, rank_of_pair = _retrieved_labels(ranked, qrels, num_rows)
    relevant = qrels.label > 0
    graded = np.bincount(qrels.qid, weights=relevant, minlength=qrels.num_queries)
    per_query: dict[str, np.ndarray] = {}
    for k in recall_ks:
        found = np.bincount(qrels.qid, weights=relevant & (rank_of_pair >= 0) & (rank_of_pair < k), minlength=qrels.num_queries)
        per_query[f"recall@{k}"] = np.where(graded > 0, found / np.where(graded > 0, graded, 1), np.nan)
    # NDCG over the retrieved entries (scored by rank) plus the judged titles not retrieved, below all of them and
    # below rank ndcg_k: a ranking shorter than ndcg_k is filled with unjudged places (gain 0), so a title it never
    # retrieved counts in the ideal ranking only, never as if it had been found
    kept = ranked >= 0
    fill = np.maximum(ndcg_k - rows_per_query, 0)
    fill_qid = np.repeat(np.arange(len(ranked)), fill)
    missed = rank_of_pair < 0
    qid = np.concatenate([np.nonzero(kept)[0], fill_qid, qrels.qid[missed]])
    label = np.concatenate([labels[kept], np.zeros(len(fill_qid), dtype=np.int64), qrels.label[missed]])
    score = np.concatenate([(depth - np.nonzero(kept)[1]).astype(np.float64), np.full(len(fill_qid), -0.5),
                            np.full(int(missed.sum()), -1.0)])
    rows = np.concatenate([ranked[kept], num_rows + np.arange(len(fill_qid)), qrels.row[missed]])
    per_query[f"ndcg@{ndcg_k}"] = ndcg_arrays(qid, label, score, rows, ks=(ndcg_k,)).per_query[ndcg_k]
    return RetrievalResult(per_query=per_query, excluded=np.flatnonzero(graded == 0))


def query_splits(judged: JudgedSet, clicks: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Per split (``cold``, ``warm``) a mask over qids: cold when none of the query's relevant products (grade > 0)
    has a click in ``clicks`` (doc_id -> clicks), warm when one has; a query without a relevant product is in neither."""
    relevant = np.zeros(judged.num_queries, dtype=bool)
    clicked = np.zeros(judged.num_queries, dtype=bool)
    for qid, doc, label in zip(judged.qid.tolist(), judged.doc_id, judged.label.tolist()):
        if label > 0:
            relevant[qid] = True
            clicked[qid] |= clicks.get(doc, 0) > 0
    return {"cold": relevant & ~clicked, "warm": relevant & clicked}


def versus(result: RetrievalResult, other: RetrievalResult, metric: str, seed: int,
           mask: np.ndarray | None = None) -> dict[str, Any]:
    """``result`` against ``other`` at ``metric`` on the queries of ``mask`` (None: every evaluated query): the mean
    difference, the paired t-test's p and 95% bootstrap CI, and ▲/▼ when significant (no test under 2 queries)."""
    from eval.compare import versus_reference

    a, b = ((result.valid(metric), other.valid(metric)) if mask is None
            else (result.per_query[metric][mask], other.per_query[metric][mask]))
    if a.size < 2:
        return {"diff": float(a.mean() - b.mean()) if a.size else None, "p": None, "ci": None, "mark": ""}
    p, ci, mark = versus_reference(a, b, seed)
    return {"diff": float(a.mean() - b.mean()), "p": p, "ci": ci, "mark": mark}
