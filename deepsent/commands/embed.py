"""``deepsent embed``: every corpus title's and judged query's vector of a trained model, exported to a folder."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import DEVICES


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``embed`` to the CLI."""
    em = subparsers.add_parser(
        "embed", parents=[common], help="export every corpus title's and judged query's vector of a trained model",
        description="Load a model (runs:/<id>/model or models:/<name>/<version>), take the vector of every corpus "
        "title and every query of the judged sets from the store's vectors/ (encoding, and storing there, only the "
        "texts no stage encoded yet), and write them to --out: titles.parquet and queries.parquet (id, text, vector) "
        "and manifest.json (the model, the counts, each file's SHA-256).",
    )
    em.add_argument("--model-uri", required=True, help="runs:/<run id>/model or models:/<name>/<version>")
    em.add_argument("--out", required=True, type=Path, help="the folder to write (new, empty, or an earlier export, "
                    "which is replaced); anywhere, in the store or not")
    em.add_argument("--judgments", action="append", type=Path, help="judged set(s) whose queries to export (default dev)")
    em.add_argument("--device", choices=DEVICES, help="default auto (env DEEPSENT_DEVICE)")
    em.add_argument("--threads", type=v.up_to(v.CORES, "a thread count"), default=2, help="torch threads on CPU (default 2)")
    em.set_defaults(handler=run_embed)


def run_embed(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Export the vectors and summarise counts, what was encoded now, throughput and the folder."""
    from encoders.search.embed import embed

    return embed(settings.with_overrides(device=args.device), args.model_uri, args.out, args.judgments,
                 args.threads).to_dict()
