"""The results of the evaluation stages (the Table IV comparison, the served search, the ship choice, the promotion),
torch-free: the chain names them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.core.results import StageResult


@dataclass(frozen=True)
class JudgedTableResult(StageResult):
    """What every table over a judged set reports: the set, the rows and the report files written."""

    judgments: str
    format: str
    queries: int
    pairs: int
    reference: str | None
    rows: list[dict[str, Any]]
    unavailable: dict[str, str]
    report: dict[str, str]
    report_name: str
    table_markdown: str


@dataclass(frozen=True)
class CompareResult(JudgedTableResult):
    """NDCG rows of every scorer on a judged set (re-ranking its judged titles), and the MLflow run."""

    excluded_queries: list[str]
    mlflow_run_id: str
    experiment: str


@dataclass(frozen=True)
class RetrievalCompareResult(JudgedTableResult):
    """Recall@10/@100 and NDCG@10 of every system searching the whole corpus of ``corpus_titles``."""

    corpus_titles: int
    depth: int
    #: BM25 + click prior's fit and every row on the cold and warm judged queries (:mod:`eval.baselines.bm25_prior`); {} without
    #: training clicks or a BM25 row.
    cold_start: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShipChoice(StageResult):
    """The model shipped, every option's mean NDCG@10 on the decision set (best first), the challenger's margin
    over MiniLM off the shelf, whether MiniLM itself ships, and what decided."""

    model_uri: str
    name: str
    scores: dict[str, float]
    challenger: str
    margin: dict[str, Any]
    off_the_shelf: bool
    signal: str
    features_version: str
    summary: str


@dataclass(frozen=True)
class PromotionResult(StageResult):
    """One promotion decision: the version, what happened and why, the figures, where it is recorded."""

    decision: str  # promoted | refused | unchanged | rolled back
    champion: str | None  # the champion version afterwards
    champion_before: str | None
    version: str
    registered_name: str
    model_uri: str
    reason: str
    forced: bool
    metric: str
    challenger_ndcg: dict[str, float] = field(default_factory=dict)
    champion_ndcg: dict[str, float] | None = None
    p_values: dict[str, float] = field(default_factory=dict)
    gate_set: str = ""
    gate_sha256: str = ""
    mlflow_run_id: str = ""
    challenger_uri: str = ""  # the model offered, as given
    stale: str = ""  # why the champion has gone stale (refused too often, too old), when it has
    served: dict[str, Any] | None = None  # both models' served search on the decision queries (eval.promotion.gate.served_figures)
    summary: str = ""
