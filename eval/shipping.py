"""Which model to ship: the candidate with the best click MRR on held-out click lists (never a judged set).

Every candidate ranks the same lists (:func:`pipeline.features.click_lists.valid_click_lists` of one features
version: each validation pair's clicked title among its negatives), so runs trained on other features,
with other n, or assembled by ``deepsent ensemble`` compare fairly. Scores already measured on those
lists (the ensemble's fit measures its own) are passed in and not recomputed.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from pipeline.core.config import Settings
from pipeline.core.results import StageResult


@dataclasses.dataclass(frozen=True)
class ShipChoice(StageResult):
    """The chosen model and every candidate's click MRR, best first."""

    model_uri: str
    name: str
    click_mrr: dict[str, float]  # candidate name -> click MRR, best first
    click_lists: int
    features_version: str
    summary: str


def candidate_mrr(settings: Settings, model_uri: str, lists: object) -> float:
    """Click MRR of ``model_uri`` on ``lists`` (a :class:`pipeline.features.click_lists.ClickLists`)."""
    from encoders.model.loading import load_encoder
    from encoders.model.vector_store import stored
    from encoders.search.fusion import click_mrr
    from encoders.search.vectors import cosine_pair_scores
    from pipeline.core.store import Store

    encoder = stored(load_encoder(model_uri, settings), Store.from_settings(settings))  # vectors kept in the store
    scores = cosine_pair_scores(encoder.encode, lists.queries, lists.titles)  # type: ignore[attr-defined]
    return click_mrr(scores, lists.group, lists.clicked)["mrr"]  # type: ignore[attr-defined]


def choose_ship(settings: Settings, candidates: Sequence[tuple[str, str]], features_version: str,
                measured: Mapping[str, float] | None = None, reference: Mapping[str, float] | None = None) -> ShipChoice:
    """The best of ``candidates`` ((name, model URI) pairs) by click MRR on the held-out lists of ``features_version``.

    ``measured`` holds MRRs already computed on those lists, by model URI; ``reference`` adds rows that
    are shown for comparison but cannot be shipped (e.g. an off-the-shelf encoder), by name.
    """
    from pipeline.core.store import Store
    from pipeline.features.click_lists import valid_click_lists

    if not candidates:
        raise ValueError("choose_ship: no candidate")
    measured = dict(measured or {})
    lists = valid_click_lists(Store.from_settings(settings), features_version)
    mrr = {uri: measured[uri] if uri in measured else candidate_mrr(settings, uri, lists) for _, uri in candidates}
    best_name, best_uri = max(candidates, key=lambda c: mrr[c[1]])  # the first of equal candidates wins
    table = sorted([(name, mrr[uri]) for name, uri in candidates] + list((reference or {}).items()),
                   key=lambda row: -row[1])
    others = ", ".join(f"{name} {value:.4f}" + (" (reference, not trained here)" if name in (reference or {}) else "")
                       for name, value in table if name != best_name)
    summary = (f"ship {best_name} ({best_uri}): the best click MRR, {mrr[best_uri]:.4f}, on {lists.num_groups} "
               f"held-out click lists of features {features_version}; then {others}")
    return ShipChoice(model_uri=best_uri, name=best_name, click_mrr=dict(table), click_lists=lists.num_groups,
                      features_version=features_version, summary=summary)
