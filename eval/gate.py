"""The promotion gate: a challenger against the champion on a fixed gate set, in one paired comparison.

The default gate set is the held-out click lists of the run's ship features (each validation query's
clicked titles grade 1, the titles the log showed it and nobody clicked grade 0): clicks the models
never trained on, and never the judged set the comparison reports. A team with its own judged gate
set passes it instead (``--gate-judgments``).

Both models score the same judged pairs through the comparison's own machinery
(:func:`eval.compare.evaluate` with :class:`~eval.model_scorer.ModelScorer`), so the NDCG@1/3/10
(exponential gain, :mod:`eval.metrics`) and the paired t-test over queries
(:mod:`eval.significance`) are exactly those of ``deepsent compare``. The rule
(:func:`decide`): promote when there is no champion, or when the challenger is not significantly
worse at any cutoff and has a higher mean on the chosen metric (NDCG@10 by default).

A gate set decides what ships; it is not for tuning: a model chosen by its gate figures is no
longer judged fairly by them. Models are tuned and early-stopped on held-out click pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.judgments import JudgedSet, load_judged_set
from eval.metrics import KS, NdcgResult
from eval.significance import ALPHA, compare_paired
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError

METRICS = tuple(f"ndcg@{k}" for k in KS)
DEFAULT_METRIC = "ndcg@10"
#: How the gate names a set of held-out click lists: ``click-lists:features/<version>``.
CLICK_GATE_PREFIX = "click-lists:features/"


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict with both models' figures (NDCG means in 0..1) and the p-value per cutoff."""

    promote: bool
    reason: str
    metric: str
    challenger: dict[str, float]
    champion: dict[str, float] | None
    p_values: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"promote": self.promote, "reason": self.reason, "metric": self.metric,
                "challenger": self.challenger, "champion": self.champion, "p_values": self.p_values}


def metric_cutoff(metric: str) -> int:
    """``ndcg@10`` -> 10; one of :data:`METRICS` or a ConfigError."""
    if metric not in METRICS:
        raise ConfigError(f"gate metric {metric!r} is not one of {', '.join(METRICS)}")
    return int(metric.split("@")[1])


def load_gate_set(settings: Settings, path: str | Path | None, features_version: str | None = None) -> JudgedSet:
    """The gate's judged set: the judged file ``path``, else the held-out click lists of ``features_version``;
    it must have graded queries for a paired test."""
    if path is not None:
        judged = load_judged_set(path)
    elif features_version:
        judged = click_judged_set(settings, features_version)
    else:
        raise ConfigError("no gate set: give a judged set (--gate-judgments) or the features whose held-out click "
                          "lists gate (--gate-features)")
    judged.require_graded_queries()
    return judged


def click_judged_set(settings: Settings, features_version: str) -> JudgedSet:
    """The held-out click lists of ``features_version`` as a judged set: per validation query, each clicked
    title grade 1 and each negative grade 0 (the validation queries never reach training)."""
    import numpy as np

    from eval.judgments import tie_ranks
    from pipeline.core.store import Store
    from pipeline.features.click_lists import valid_click_lists

    lists = valid_click_lists(Store.from_settings(settings), features_version)
    grade: dict[tuple[str, str], int] = {}
    for query, title, clicked in zip(lists.queries, lists.titles, lists.clicked.tolist()):
        grade[query, title] = max(grade.get((query, title), 0), int(clicked))
    qindex: dict[str, int] = {}
    queries = [q for q, _ in grade]
    titles = [t for _, t in grade]
    return JudgedSet(name="click-lists", source=f"{CLICK_GATE_PREFIX}{features_version}", fmt="clicks",
                     query_raw=queries, query=queries, title=titles, doc_id=titles,
                     label=np.fromiter(grade.values(), dtype=np.int64, count=len(grade)),
                     qid=np.fromiter((qindex.setdefault(q, len(qindex)) for q in queries), dtype=np.int64,
                                     count=len(queries)),
                     tie_rank=tie_ranks(titles))


def score_models(settings: Settings, judged: JudgedSet, model_uris: list[str]) -> list[NdcgResult]:
    """Per-query NDCG of each model on ``judged``, scored as ``deepsent compare`` scores models."""
    from eval.baselines.base import FitContext
    from eval.compare import evaluate
    from eval.model_scorer import ModelScorer
    from pipeline.core.store import Store

    # A model learns nothing from the context: it only loads its weights.
    ctx = FitContext(settings=settings, store=Store.from_settings(settings), train_titles=[], train_queries=[],
                     test_titles=list(dict.fromkeys(judged.title)), test_queries=list(dict.fromkeys(judged.query)))
    return [evaluate(uri, uri, "model", ModelScorer(uri), ctx, judged).result for uri in model_uris]


def means(result: NdcgResult) -> dict[str, float]:
    """``{"ndcg@1": ..., "ndcg@3": ..., "ndcg@10": ...}`` of one model."""
    return {f"ndcg@{k}": result.mean(k) for k in KS}


def _figures(challenger: dict[str, float], champion: dict[str, float], p_values: dict[str, float]) -> str:
    return "; ".join(f"{m} {challenger[m]:.4f} vs {champion[m]:.4f} (p={p_values[m]:.3g})" for m in METRICS)


def decide(challenger: NdcgResult, champion: NdcgResult | None, metric: str = DEFAULT_METRIC,
           seed: int = SEED) -> GateDecision:
    """The gate rule on two models' per-query NDCG over the same queries (see the module docstring)."""
    metric_cutoff(metric)
    ours = means(challenger)
    if champion is None:
        return GateDecision(True, "no champion yet", metric, ours, None, {})
    theirs = means(champion)
    tests = {f"ndcg@{k}": compare_paired(challenger.valid(k), champion.valid(k), seed=seed) for k in KS}
    p_values = {m: t.p_value for m, t in tests.items()}
    figures = _figures(ours, theirs, p_values)
    worse = [m for m, t in tests.items() if t.significant(ALPHA) and t.mean_diff < 0]
    if worse:
        reason = f"significantly worse at {', '.join(worse)} (paired t-test, p < {ALPHA}): {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values)
    if ours[metric] <= theirs[metric]:
        reason = f"not better at {metric}: {figures}"
        return GateDecision(False, reason, metric, ours, theirs, p_values)
    return GateDecision(True, f"better at {metric} and not significantly worse at any cutoff: {figures}",
                        metric, ours, theirs, p_values)
