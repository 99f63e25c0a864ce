"""``deepsent pairs``: clicked (query, title) pairs split train/valid by query, and the skipped titles."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``pairs`` to the CLI."""
    pairs = subparsers.add_parser(
        "pairs", parents=[common], help="clicked (query, title) pairs split train/valid by query",
        description="Aggregate every ingested clicks/ partition into pairs/train.parquet and pairs/valid.parquet.",
    )
    pairs.add_argument("--valid-fraction", type=v.fraction, default=0.1, help="share of queries held out (default 0.1)")
    pairs.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the query split hash (default {SEED})")
    pairs.set_defaults(handler=run_pairs)


def run_pairs(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Build the train/valid pair files from every ingested date."""
    from pipeline.features.pairs import build_pairs

    result = build_pairs(settings, valid_fraction=args.valid_fraction, seed=args.seed)
    summary = (
        f"pairs from {result['rows_read']:,} click rows ({result['clicked_rows']:,} clicked): "
        f"{result['pairs']:,} clicked (query, title) pairs\n"
        f"  train: {result['train_pairs']:,} pairs, {result['train_queries']:,} queries -> {result['outputs']['train']}\n"
        f"  valid: {result['valid_pairs']:,} pairs, {result['valid_queries']:,} queries -> {result['outputs']['valid']}\n"
        f"  skipped titles (shown, never clicked): {result['train_skipped_rows']:,} train / "
        f"{result['valid_skipped_rows']:,} valid rows -> {result['outputs']['skipped_train']}"
    )
    return {**result, "summary": summary}
