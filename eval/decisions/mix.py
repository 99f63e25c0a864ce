"""The ensemble's mix, chosen on the decision set so that it survives noise.

The LSTM-RNN's share of the joined score, ``mix`` in 0, 0.05 … 0.95 (0 is MiniLM alone): every share re-ranks the
decision set's judged titles by ``mix * R_LSTM + (1 - mix) * R_MiniLM`` (exactly the joined model's cosine), and
per-query NDCG@10 is measured. Of the shares within one standard error of the best, the smallest wins
(:func:`encoders.search.margins.simplest_near_best`); it is kept only when it beats MiniLM alone by a paired
bootstrap CI above zero, else the mix is 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from encoders.search.margins import Margin, paired_margin, simplest_near_best
from eval.decisions.gate_set import DecisionSet
from eval.metrics import ndcg
from pipeline.core.defaults import SEED

#: The shares tried, simplest first: 0 (MiniLM alone), then the LSTM-RNN's share 0.05 to 0.95.
SHARES = (0.0,) + tuple(round(0.05 * i, 2) for i in range(1, 20))
#: The cutoff every decision's NDCG is measured at.
DECISION_K = 10


@dataclass(frozen=True)
class MixChoice:
    """The chosen share, the best one, the curve (share -> mean NDCG@10), the chosen share's margin over MiniLM
    alone, each part's mean alone, what decided and why."""

    weight: float
    best: float
    curve: dict[float, float]
    margin: Margin
    parts: dict[str, float]
    signal: str
    why: str

    @property
    def score(self) -> float:
        """The chosen share's mean NDCG@10 on the decision set."""
        return self.curve[self.weight]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"weight": self.weight, "best": self.best, "curve": {str(w): m for w, m in self.curve.items()},
                "margin": self.margin.to_dict(), "parts": self.parts, "signal": self.signal, "why": self.why}


def per_query(decision: DecisionSet, scores: np.ndarray) -> np.ndarray:
    """NDCG@10 per graded query of the decision set re-ranked by ``scores`` (aligned with its judged pairs)."""
    return ndcg(decision.judged, scores, (DECISION_K,)).valid(DECISION_K)


def choose_mix(decision: DecisionSet, lstm: np.ndarray, minilm: np.ndarray, seed: int = SEED) -> MixChoice:
    """The mix of the LSTM-RNN's cosines ``lstm`` and MiniLM's ``minilm`` (both over the decision set's judged pairs)
    by the rule of the module docstring."""
    figures = [per_query(decision, share * lstm + (1 - share) * minilm) for share in SHARES]
    chosen, best = simplest_near_best(figures)
    margin = paired_margin(figures[chosen], figures[0], seed)
    curve = {share: round(float(f.mean()), 6) for share, f in zip(SHARES, figures)}
    if chosen and not margin.beats():
        why = (f"the smallest share within one SE of the best ({SHARES[best]:.2f}) is {SHARES[chosen]:.2f}, which does "
               f"not beat MiniLM alone by more than the noise ({margin.text()}): mix 0, MiniLM alone")
        chosen = 0
    elif chosen:
        why = (f"share {SHARES[chosen]:.2f}, the smallest within one SE of the best ({SHARES[best]:.2f}), beats "
               f"MiniLM alone: {margin.text()}")
    else:
        why = f"MiniLM alone (share 0) is within one SE of the best share ({SHARES[best]:.2f})"
    parts = {"lstm": round(float(per_query(decision, lstm).mean()), 6), "minilm": curve[0.0]}
    return MixChoice(SHARES[chosen], SHARES[best], curve, margin, parts, decision.signal, why)


@dataclass(frozen=True)
class MixDecider:
    """The chooser ``encoders.training.ensemble_build.build_ensemble`` takes: the decision set's judged pairs, a key
    naming the set (its name and content digest: a resumed ensemble was chosen on the same set), and the choice."""

    decision: DecisionSet
    seed: int = SEED

    @property
    def pairs(self) -> tuple[list[str], list[str]]:
        """The (queries, titles) both parts score, aligned with the judged pairs."""
        return list(self.decision.judged.query), list(self.decision.judged.title)

    @property
    def key(self) -> str:
        """``<set name>:<first 16 hex digits of its SHA-256>``."""
        return f"{self.decision.judged.name}:{self.decision.judged.digest()[:16]}"

    @property
    def signal(self) -> str:
        """What the decision set is."""
        return self.decision.signal

    def choose(self, lstm: np.ndarray, minilm: np.ndarray) -> MixChoice:
        """:func:`choose_mix` on both parts' cosines."""
        return choose_mix(self.decision, lstm, minilm, self.seed)
