"""``deepsent embed``: every corpus title and judged query -> vectors of a trained model (``embeddings/``)."""
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
        "embed", parents=[common], help="embed every corpus title and judged query with a trained model",
        description="Load a model (runs:/<id>/model or models:/<name>/<version>), encode every distinct title of "
        "the Home Depot judgments and the click pairs and every query of the judged sets, and write "
        "embeddings/<model>-<run>/{titles,queries}/part-*.parquet with a manifest.",
    )
    em.add_argument("--model-uri", required=True, help="runs:/<run id>/model or models:/<name>/<version>")
    em.add_argument("--judgments", action="append", type=Path, help="judged set(s) whose queries to embed (default dev)")
    em.add_argument("--batch-size", type=v.up_to(65_536), help="sentences per forward pass (default: the stored vectors' "
                    "shape-stable batches, 128 for trigram towers and 16 for MiniLM)")
    em.add_argument("--device", choices=DEVICES, help="default auto (env DEEPSENT_DEVICE)")
    em.add_argument("--threads", type=v.up_to(v.CORES, "a thread count"), default=2, help="torch threads on CPU (default 2)")
    em.set_defaults(handler=run_embed)


def run_embed(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Embed the corpus and summarise counts, throughput and the output folder."""
    from encoders.search.embed import embed

    return embed(settings.with_overrides(device=args.device), args.model_uri, args.judgments, args.batch_size,
                 args.threads).to_dict()
