"""``deepsent compare``: NDCG@1/3/10 of baselines and trained models on a judged set (Table IV)."""
from __future__ import annotations

import argparse
from typing import Any

from eval.baseline_catalog import baseline_names
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED

BASELINE_HELP = (
    f"comma-separated baselines, default {','.join(baseline_names())}; "
    "options as name:key=value[:key=value], e.g. plsa:topics=500"
)


def _csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ``compare`` command."""
    p = subparsers.add_parser(
        "compare",
        parents=[common],
        help="rank a judged set with every baseline and model: NDCG@1/3/10 with significance",
        description="Scores each query's judged titles with every selected scorer and writes the table "
        "(Markdown, CSV, HTML, bar chart) to reports/<run>/ in the store and to MLflow. "
        "Without arguments it evaluates the default baselines on the dev set.",
    )
    p.add_argument("--judgments", help="judged set (default: judgments_dev.csv of the data folder)")
    p.add_argument("--format", choices=("homedepot", "generic"), help="judged set format (default: detected)")
    p.add_argument("--models", type=_csv_list, default=[], help="comma-separated trained model run ids or registry URIs")
    p.add_argument("--baselines", type=_csv_list, default=None, help=BASELINE_HELP)
    p.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the random floor, fits and the bootstrap (default {SEED})")
    p.add_argument("--report-name", help="folder name under reports/ (default: derived from the inputs)")
    p.add_argument("--retrieval", action="store_true",
                   help="each judged query searches the whole corpus (unjudged titles count as not relevant): "
                   "Recall@10/@100 and NDCG@10 of BM25, the --models and MiniLM through the index deepsent index "
                   "serves at this corpus size (its recall@10 against exact search when approximate), significance "
                   "vs BM25; --baselines may only name bm25, minilm")
    p.set_defaults(handler=run_compare)


def summary_text(result: dict[str, Any]) -> str:
    """The table, unavailable baselines, and where everything was written."""
    lines = [result["table_markdown"].rstrip()]
    for reason in result["unavailable"].values():
        lines.append(f"note: {reason}")
    timing = ", ".join(
        f"{r['key']} fit {r['fit_seconds']:.1f}s{' (cached)' if r['cached'] else ''} score {r['score_seconds']:.1f}s"
        for r in result["rows"]
    )
    lines += [f"timings: {timing}", f"report: {result['report']['table.md']}", f"mlflow run: {result['mlflow_run_id']}"]
    return "\n".join(lines)


def retrieval_summary(result: dict[str, Any]) -> str:
    """The retrieval table, unavailable baselines, and where it was written."""
    lines = [result["table_markdown"].rstrip()] + [f"note: {reason}" for reason in result["unavailable"].values()]
    timing = ", ".join(f"{r['key']} {r['seconds']:.1f}s" for r in result["rows"])
    return "\n".join(lines + [f"timings: {timing}", f"report: {result['report']['retrieval.md']}"])


def run_compare(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Handler of ``deepsent compare`` (``--retrieval``: search the whole corpus instead of re-ranking)."""
    if getattr(args, "retrieval", False):
        from eval.retrieval.compare import judged_retrieval

        found = judged_retrieval(settings, judgments=args.judgments, fmt=args.format, models=args.models,
                                 baselines=args.baselines, seed=args.seed, report_name=args.report_name).to_dict()
        return {**found, "summary": retrieval_summary(found)}
    from eval.compare import compare

    result = compare(
        settings,
        judgments=args.judgments,
        fmt=args.format,
        models=args.models,
        baselines=args.baselines,
        seed=args.seed,
        report_name=args.report_name,
    ).to_dict()
    return {**result, "summary": summary_text(result)}
