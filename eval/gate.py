"""The promotion gate: a challenger against the champion on a fixed judged set, in one paired comparison.

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


def load_gate_set(settings: Settings, path: str | Path | None) -> JudgedSet:
    """The gate's judged set: ``path``, else the dev set; it must have graded queries for a paired test."""
    judged = load_judged_set(path or settings.dev_judgments)
    judged.require_graded_queries()
    return judged


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
