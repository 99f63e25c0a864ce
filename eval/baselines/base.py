"""What every ranking scorer (baseline or trained model) provides, and the registry of them.

A scorer is fitted once on a :class:`FitContext` and then scores aligned (query, title)
pairs of normalised text; higher means more relevant. ``describe()`` returns the row
details of the comparison table (settings, parameter count, fit seconds).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.core.validators import Validator, checked
from pipeline.storage.store import Store

#: FitContext.extra key holding the trained models of the comparison (``--models``), for fusion baselines.
MODEL_URIS_KEY = "model_uris"


@dataclass
class FitContext:
    """What a scorer may learn from.

    ``train_*`` is the training side (normalised titles/queries of judgments_train.csv);
    ``test_*`` is the judged set being evaluated (only unsupervised use is allowed, e.g.
    doc2vec's inference as in the paper; labels are never given to scorers).
    """

    settings: Settings
    store: Store
    train_titles: list[str]
    train_queries: list[str]
    test_titles: list[str]
    test_queries: list[str]
    seed: int = SEED
    extra: dict[str, Any] = field(default_factory=dict)


class Scorer(Protocol):
    """A ranking function over (query, title) pairs."""

    name: str

    def fit(self, ctx: FitContext) -> None:
        """Learn whatever the scorer needs (statistics, a model); may use the store as cache."""

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """One float64 score per aligned (query, title) pair of normalised text."""

    def describe(self) -> dict[str, Any]:
        """Table details: ``settings`` (str), ``params`` (int or None), ``fit_seconds`` (float)."""


def check_options(scorer_cls: type, name: str, raw: Mapping[str, str]) -> dict[str, Any]:
    """The options ``raw`` (texts from a ``name:key=value`` spec) typed and range-checked by the class's ``OPTIONS``."""
    known: Mapping[str, Validator] = getattr(scorer_cls, "OPTIONS", {})
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"baseline {name}: unknown option(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known)) or 'none'}")
    return {key: checked(f"baseline {name}: option {key}", known[key], text) for key, text in raw.items()}
