"""The result of the comparison stage (the Table IV of one judged set)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.results import StageResult


@dataclass(frozen=True)
class CompareResult(StageResult):
    """NDCG rows of every scorer on a judged set, the report files written and the MLflow run."""

    judgments: str
    format: str
    queries: int
    pairs: int
    excluded_queries: list[str]
    reference: str | None
    rows: list[dict[str, Any]]
    unavailable: dict[str, str]
    report: dict[str, str]
    report_name: str
    mlflow_run_id: str
    experiment: str
    table_markdown: str


@dataclass(frozen=True)
class RetrievalCompareResult(StageResult):
    """Recall@10/@100 and NDCG@10 of every system searching the whole corpus, and the report files."""

    judgments: str
    format: str
    queries: int
    pairs: int
    corpus_titles: int
    depth: int
    reference: str | None
    rows: list[dict[str, Any]]
    unavailable: dict[str, str]
    report: dict[str, str]
    report_name: str
    table_markdown: str
