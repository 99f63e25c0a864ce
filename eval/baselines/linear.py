"""BM25 fused with a trained model: a normalised linear mix whose weight is fitted on held-out click pairs.

Each query's candidates are scored by BM25 and by the model (cosine), each min-max scaled within the
query's list (``norm=zscore`` or ``none`` on request), and ranked by ``w * model + (1 - w) * BM25``: the formula of
the served ``linear`` mode (:mod:`encoders.search.served`). ``w`` is
the grid weight (0, 0.05, ..., 1) with the best MRR of the clicked title among its negatives on the
*validation click pairs* of the features the model was trained on (:mod:`pipeline.features.click_lists`),
scored with a BM25 over the training titles only: no judged set, not even its text, reaches the fit.
The model is the ``model``-th of ``deepsent compare --models`` (``ctx.extra[MODEL_URIS_KEY]``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from encoders.search.fusion import NORMALISATIONS, WeightFit, click_mrr, fit_linear_weight, linear_fusion
from encoders.search.vectors import unique_index
from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import MODEL_URIS_KEY, FitContext
from eval.baselines.bm25 import BM25Scorer
from eval.model_scorer import ModelScorer
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.features.click_lists import ClickLists, valid_click_lists
from pipeline.storage.store import Store

SPEC = BaselineSpec(name="linear", label="BM25 + model, linear (w fitted on click pairs)", cls="LinearFusionScorer",
                    order=8, reference=False)


def features_of_run(settings: Settings, run_id: str) -> str:
    """The features version a training run used (its MLflow param ``features_version``)."""
    from mlflow import MlflowClient

    params = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).get_run(run_id).data.params
    if not params.get("features_version"):
        raise ConfigError(f"run {run_id}: no features_version param; pass linear:features=VERSION")
    return params["features_version"]


def click_bm25(train_titles: Sequence[str], lists: ClickLists) -> np.ndarray:
    """BM25 scores of click lists, with term statistics from the training titles (plus the lists' own)."""
    known = set(train_titles)
    bm25 = BM25Scorer()
    bm25.fit_corpus(list(train_titles) + [t for t in dict.fromkeys(lists.titles) if t not in known])
    return bm25.score(lists.queries, lists.titles)


def fit_click_weight(store: Store, version: str, model: ModelScorer, train_titles: Sequence[str],
                     method: str) -> tuple[WeightFit, dict[str, float], int]:
    """The fusion weight fitted on the validation click pairs of ``version`` (no judged-set input).

    Returns the fit, the click MRR of BM25 and of the model alone, and the number of click pairs.
    """
    lists = valid_click_lists(store, version)
    bm25_scores = click_bm25(train_titles, lists)
    model_scores = model.score(lists.queries, lists.titles)
    alone = {"bm25": click_mrr(bm25_scores, lists.group, lists.clicked)["mrr"],
             "model": click_mrr(model_scores, lists.group, lists.clicked)["mrr"]}
    return fit_linear_weight(model_scores, bm25_scores, lists.group, lists.clicked, method), alone, lists.num_groups


class FusionScorer:
    """What both fusions share: BM25 and the chosen model fitted on the context, scores per query list."""

    name = "fusion"
    needs_model = True  # compare lists it as unavailable when no --models are given
    OPTIONS: dict[str, Any] = {"model": v.positive_int}

    def __init__(self, model: int = 1, model_loader: Callable[..., Any] | None = None) -> None:
        self.model_index = int(model)
        self._loader = model_loader
        self.bm25 = BM25Scorer()
        self.model: ModelScorer | None = None
        self._fit_seconds = 0.0

    def fit(self, ctx: FitContext) -> None:
        """Fit BM25 as the BM25 row does and load the model; subclasses add their own fitting."""
        start = time.perf_counter()
        uris = list(ctx.extra.get(MODEL_URIS_KEY) or [])
        if self.model_index > len(uris):
            raise ConfigError(f"{self.name}: model={self.model_index} but {len(uris)} model(s) given with --models")
        self.model = ModelScorer(uris[self.model_index - 1], self._loader)
        self.model.fit(ctx)
        self.bm25.fit(ctx)
        self.fit_more(ctx)
        self._fit_seconds = time.perf_counter() - start

    def fit_more(self, ctx: FitContext) -> None:
        """Extra fitting of a fusion (none by default)."""

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """The fused score of each title within its query's list."""
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.score() called before fit()")
        group = unique_index(queries)[1]
        return self.fuse(self.model.score(queries, titles), self.bm25.score(queries, titles), group)

    def fuse(self, model: np.ndarray, bm25: np.ndarray, group: np.ndarray) -> np.ndarray:
        """Combine the two scorers within each group."""
        raise NotImplementedError

    def settings_text(self) -> str:
        """How the fusion was set up, for the table."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Row details: the fusion's settings, the model's parameters and run, fit time."""
        model = self.model.describe() if self.model else {}
        return {"settings": f"{self.settings_text()}; model {model.get('model_uri', '?')}",
                "params": model.get("params"), "fit_seconds": self._fit_seconds, "run_id": model.get("run_id")}


class LinearFusionScorer(FusionScorer):
    """``w * model + (1 - w) * BM25`` on per-query normalised scores, ``w`` fitted on validation click pairs."""

    name = "linear"
    OPTIONS = {**FusionScorer.OPTIONS, "norm": v.choice(*NORMALISATIONS), "features": v.features_version}

    def __init__(self, model: int = 1, norm: str = "minmax", features: str = "",
                 model_loader: Callable[..., Any] | None = None) -> None:
        super().__init__(model, model_loader)
        self.norm, self.features = norm, features
        self.fitted: WeightFit | None = None
        self.alone: dict[str, float] = {}
        self.click_pairs = 0

    def fit_more(self, ctx: FitContext) -> None:
        """Fit ``w`` on the validation click pairs of the model's features (or ``features=``)."""
        assert self.model is not None
        version = self.features or features_of_run(ctx.settings, str(self.model.describe()["run_id"]))
        self.features = version
        self.fitted, self.alone, self.click_pairs = fit_click_weight(ctx.store, version, self.model,
                                                                     ctx.train_titles, self.norm)

    def fuse(self, model: np.ndarray, bm25: np.ndarray, group: np.ndarray) -> np.ndarray:
        """The linear mix with the fitted weight."""
        assert self.fitted is not None
        return linear_fusion(model, bm25, group, self.fitted.weight, self.norm)

    def settings_text(self) -> str:
        """Weight, its click MRR beside each scorer alone, normalisation, features."""
        fit = self.fitted
        if fit is None:
            return f"{self.norm}, not fitted"
        return (f"w={fit.weight:.2f} ({self.norm}) by click MRR {fit.mrr:.4f} on {self.click_pairs} valid pairs of "
                f"features {self.features} (BM25 alone {self.alone['bm25']:.4f}, "
                f"model alone {self.alone['model']:.4f})")
