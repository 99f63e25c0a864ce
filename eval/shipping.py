"""Which model to ship: a trained candidate only when it beats MiniLM off the shelf by more than the noise.

Every candidate (each trained run and the ensemble) and the reference, all-MiniLM-L6-v2 off the shelf, re-rank the
same decision set (:func:`eval.decisions.gate_set.decision_set`: the judged gate set, else the held-out click
lists); per-query NDCG@10 is measured. Of the candidates within one standard error of the best, the one with the
fewest parameters is the challenger (:func:`encoders.search.margins.simplest_near_best`); it ships when the paired
bootstrap CI of its margin over MiniLM lies above zero. Otherwise MiniLM off the shelf ships, logged as a model of
its own (:func:`encoders.training.ensemble_build.off_the_shelf_model`), and the summary says so with the margin.
The reported judged set is never read.
"""
from __future__ import annotations

from typing import Any, Sequence

from encoders.search.margins import paired_margin, simplest_near_best
from eval.decisions.gate_set import DecisionSet
from eval.decisions.mix import per_query
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from eval.results import ShipChoice

REFERENCE = "MiniLM-L6 off-the-shelf"


def _figures(settings: Settings, decision: DecisionSet, model_uri: str) -> tuple[Any, Any]:
    """(per-query NDCG@10 on the decision set, the loaded scorer) of one model."""
    from eval.baselines.base import FitContext
    from eval.model_scorer import ModelScorer
    from pipeline.storage.store import Store

    scorer = ModelScorer(model_uri)
    scorer.fit(FitContext(settings=settings, store=Store.from_settings(settings), train_titles=[], train_queries=[],
                          test_titles=[], test_queries=[]))
    return per_query(decision, scorer.score(decision.judged.query, decision.judged.title)), scorer


def reference_figures(settings: Settings, decision: DecisionSet, like_uri: str) -> Any:
    """Per-query NDCG@10 of MiniLM off the shelf on the decision set (its vectors read from the store)."""
    from encoders.model.vector_store import stored
    from encoders.search.vectors import cosine_pair_scores
    from encoders.training.ensemble_build import off_the_shelf_encoder
    from pipeline.storage.store import Store

    encoder = stored(off_the_shelf_encoder(settings, like_uri), Store.from_settings(settings))
    return per_query(decision, cosine_pair_scores(encoder.encode, decision.judged.query, decision.judged.title))


def choose_ship(settings: Settings, candidates: Sequence[tuple[str, str]], decision: DecisionSet,
                features_version: str = "", seed: int = SEED, tags: dict[str, str] | None = None) -> ShipChoice:
    """The model to ship among ``candidates`` ((name, model URI) pairs) and MiniLM off the shelf, by the rule of the
    module docstring."""
    from encoders.training.ensemble_build import off_the_shelf_model

    if not candidates:
        raise ValueError("choose_ship: no candidate")
    measured = [(name, uri, *_figures(settings, decision, uri)) for name, uri in candidates]
    measured.sort(key=lambda row: row[3].describe()["params"] or 0)  # the simplest first
    reference = reference_figures(settings, decision, candidates[0][1])
    chosen, best = simplest_near_best([row[2] for row in measured])
    name, uri, figures, _ = measured[chosen]
    margin = paired_margin(figures, reference, seed)
    scores = dict(sorted([(n, float(f.mean())) for n, _, f, _ in measured] + [(REFERENCE, float(reference.mean()))],
                         key=lambda row: -row[1]))
    table = ", ".join(f"{n} {v:.4f}" for n, v in scores.items())
    pick = (f"{name}, the fewest parameters within one SE of the best ({measured[best][0]})" if chosen != best
            else f"{name}, the best")
    if margin.beats():
        summary = (f"ship {name} ({uri}): {pick}, beats {REFERENCE} on the {decision.signal} at NDCG@10: "
                   f"{margin.text()}; all: {table}")
        shipped, off = uri, False
    else:
        shipped, off = off_the_shelf_model(settings, candidates[0][1], tags=tags), True
        summary = (f"ship {REFERENCE} ({shipped}): no trained model beat the off-the-shelf encoder on the "
                   f"{decision.signal}: {pick} {margin.text()}; all: {table}")
    return ShipChoice(model_uri=shipped, name=REFERENCE if off else name, scores=scores, challenger=name,
                      margin=margin.to_dict(), off_the_shelf=off, signal=decision.signal,
                      features_version=features_version, summary=summary)
