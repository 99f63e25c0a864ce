"""The result of the comparison stage (the Table IV of one judged set)."""
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
