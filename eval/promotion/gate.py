"""The promotion gate: a challenger against the champion on a fixed gate set, in one paired comparison.

The gate set is the chain's decision set (:func:`eval.decisions.gate_set.decision_set`): the judged gate set of
the settings (the demo's gate slice by default, or a team's own judged file), else the held-out click lists of the
run's ship features (each validation query's clicked titles grade 1, the titles the log showed it and nobody
clicked grade 0); never the judged set the comparison reports.

Both models score the same judged pairs through the comparison's own machinery
(:func:`eval.compare.evaluate` with :class:`~eval.model_scorer.ModelScorer`), so the NDCG@1/3/10
(exponential gain, :mod:`eval.metrics`) and the paired t-test over queries
(:mod:`eval.significance`) are exactly those of ``deepsent compare``.

The gate also judges what is served (:func:`served_figures`): both models search the whole corpus on
the same decision queries (the gate set's, else the held-out click queries), each in the mode ``deepsent index``
would serve, its mode and linear weight chosen on one half of the queries and its Recall@10 and NDCG@10 measured
per query on the other.

The rule (:func:`decide`): promote when there is no champion, or when the challenger beats the champion on the
chosen metric (NDCG@10 by default) by a paired bootstrap CI above zero (:mod:`encoders.search.margins`) and is
not significantly worse at any re-ranking cutoff nor at served NDCG@10.

A gate set decides what ships; it is not for tuning: a model chosen by its gate figures is no
longer judged fairly by them. Models are tuned and early-stopped on held-out click pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from eval.judgments import JudgedSet
from eval.metrics import KS, NdcgResult
from encoders.search.margins import paired_margin
from eval.significance import ALPHA, compare_paired
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError

METRICS = tuple(f"ndcg@{k}" for k in KS)
DEFAULT_METRIC = "ndcg@10"


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict with both models' figures (NDCG means in 0..1) and the p-value per cutoff."""

    promote: bool
    reason: str
    metric: str
    challenger: dict[str, float]
    champion: dict[str, float] | None
    p_values: dict[str, float]
    served: dict[str, Any] | None = None  # both models' served mode and whole-corpus figures, and the p-value

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"promote": self.promote, "reason": self.reason, "metric": self.metric,
                "challenger": self.challenger, "champion": self.champion, "p_values": self.p_values,
                "served": self.served}


#: The cutoff of the served search's Recall and NDCG.
SERVED_K = 10


@dataclass(frozen=True)
class ServedFigures:
    """One model's served mode, its linear weight and its per-query Recall@10 and NDCG@10 on the judged half, searched
    through ``index`` (the FAISS index the served rule builds for the corpus: what ``deepsent index`` serves)."""

    mode: str
    linear_weight: float
    corpus_titles: int
    recall: np.ndarray
    ndcg: np.ndarray
    signal: str = ""
    index: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form: the mode, the weight, the means and the number of queries."""
        return {"mode": self.mode, "linear_weight": self.linear_weight, "recall@10": round(float(self.recall.mean()), 4),
                "ndcg@10": round(float(self.ndcg.mean()), 4), "queries": int(self.recall.size),
                "corpus_titles": self.corpus_titles, "signal": self.signal, "index": self.index}


def served_figures(settings: Settings, scorers: list[Any], seed: int,
                   decision: Any | None = None) -> list[ServedFigures] | None:
    """Each model's :class:`ServedFigures` on the decision's queries (:func:`eval.decisions.gate_set.served_decision`:
    the gate set's, else the held-out click queries) over the whole corpus (``scorers``: the models as
    :class:`~eval.model_scorer.ModelScorer`, already loaded by :func:`score_models`; ``decision``: the decision set
    when the caller read it already); None with fewer than two."""
    from encoders.search.bm25 import BM25Index
    from encoders.search.corpus_index import tuning_vectors
    from pipeline.ingest.catalog.corpus import corpus_titles
    from encoders.search.served import choose_default_mode, halves, memoized, query_ndcg, query_recall
    from encoders.search.served_index import ServedIndex
    from eval.decisions.gate_set import served_decision
    from eval.retrieval.compare import corpus_of
    from pipeline.storage.store import Store

    store = Store.from_settings(settings)
    corpus = corpus_of(corpus_titles(settings, store)[0])
    decision = served_decision(settings, chosen=decision).within(set(corpus.doc_ids))
    if len(decision.relevant) < 2:
        return None
    bm25 = BM25Index()
    bm25.fit_corpus(corpus.titles)
    judged = list(halves(decision.relevant)[1])  # choose_default_mode judges the modes on this half
    out = []
    for scorer in scorers:
        searcher = ServedIndex.in_memory(scorer, scorer.encode(corpus.titles, "doc"), corpus.doc_ids, corpus.titles, bm25,
                                         tuning_vectors(store, seed, scorer, len(corpus.doc_ids)), seed)
        search = memoized(searcher.mode_search(list(decision.relevant)))
        choice = choose_default_mode(search, decision, SERVED_K, seed)
        weight = float(choice.get("linear_weight", 0.5))
        found = search(judged, SERVED_K, choice["default_mode"], weight)
        gains = [decision.relevant[q] for q in judged]
        out.append(ServedFigures(choice["default_mode"], weight, len(corpus.doc_ids),
                                 np.array([query_recall(f, set(g)) for f, g in zip(found, gains)]),
                                 np.array([query_ndcg(f, g, SERVED_K) for f, g in zip(found, gains)]),
                                 decision.signal, searcher.manifest["index_type"]))
    return out


def metric_cutoff(metric: str) -> int:
    """``ndcg@10`` -> 10; one of :data:`METRICS` or a ConfigError."""
    if metric not in METRICS:
        raise ConfigError(f"gate metric {metric!r} is not one of {', '.join(METRICS)}")
    return int(metric.split("@")[1])


def score_models(settings: Settings, judged: JudgedSet, scorers: list[Any]) -> list[NdcgResult]:
    """Per-query NDCG on ``judged`` of each model (a :class:`~eval.model_scorer.ModelScorer`, loaded here), scored as
    ``deepsent compare`` scores models."""
    from eval.baselines.base import FitContext
    from eval.compare import evaluate
    from pipeline.storage.store import Store

    # A model learns nothing from the context: it only loads its weights.
    ctx = FitContext(settings=settings, store=Store.from_settings(settings), train_titles=[], train_queries=[],
                     test_titles=list(dict.fromkeys(judged.title)), test_queries=list(dict.fromkeys(judged.query)))
    return [evaluate(scorer.model_uri, scorer.model_uri, "model", scorer, ctx, judged).result for scorer in scorers]


def means(result: NdcgResult) -> dict[str, float]:
    """``{"ndcg@1": ..., "ndcg@3": ..., "ndcg@10": ...}`` of one model."""
    return {f"ndcg@{k}": result.mean(k) for k in KS}


def _figures(challenger: dict[str, float], champion: dict[str, float], p_values: dict[str, float]) -> str:
    return "; ".join(f"{m} {challenger[m]:.4f} vs {champion[m]:.4f} (p={p_values[m]:.3g})" for m in METRICS)


def served_record(served: list[ServedFigures] | None, seed: int) -> tuple[dict[str, Any] | None, bool, str]:
    """(both models' served figures with the paired p-value at NDCG@10, whether the challenger is significantly
    worse there, the figures as text) from :func:`served_figures` (challenger first)."""
    if not served:
        return None, False, ""
    record: dict[str, Any] = {"challenger": served[0].to_dict(), "champion": None, "p_value": None}
    text = f"served {served[0].mode} NDCG@10 {record['challenger']['ndcg@10']:.4f}"
    if len(served) < 2:
        return record, False, text
    test = compare_paired(served[0].ndcg, served[1].ndcg, seed=seed)
    record.update(champion=served[1].to_dict(), p_value=test.p_value)
    text += f" vs {served[1].mode} {record['champion']['ndcg@10']:.4f} (p={test.p_value:.3g})"
    return record, bool(test.significant(ALPHA) and test.mean_diff < 0), text


def decide(challenger: NdcgResult, champion: NdcgResult | None, metric: str = DEFAULT_METRIC,
           seed: int = SEED, served: list[ServedFigures] | None = None) -> GateDecision:
    """The gate rule on two models' per-query NDCG over the same queries, and on their served search
    (``served``: challenger first; see the module docstring)."""
    k = metric_cutoff(metric)
    ours = means(challenger)
    record, served_worse, served_text = served_record(served, seed)
    if champion is None:
        return GateDecision(True, "no champion yet", metric, ours, None, {}, record)
    theirs = means(champion)
    tests = {f"ndcg@{k}": compare_paired(challenger.valid(k), champion.valid(k), seed=seed) for k in KS}
    p_values = {m: t.p_value for m, t in tests.items()}
    figures = "; ".join(filter(None, [_figures(ours, theirs, p_values), served_text]))
    worse = [m for m, t in tests.items() if t.significant(ALPHA) and t.mean_diff < 0]
    worse += ["served NDCG@10"] if served_worse else []
    if worse:
        reason = f"significantly worse at {', '.join(worse)} (paired t-test, p < {ALPHA}): {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values, record)
    margin = paired_margin(challenger.valid(k), champion.valid(k), seed)
    record = {**(record or {}), "margin": {metric: margin.to_dict()}}
    if not margin.beats():
        reason = f"not better than the champion by more than the noise at {metric}: {margin.text()}; {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values, record)
    return GateDecision(True, f"beats the champion at {metric} ({margin.text()}) and is not significantly worse at "
                        f"any cutoff nor in served search: {figures}", metric, ours, theirs, p_values, record)
