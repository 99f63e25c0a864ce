"""``deepsent index``: a model's corpus vectors -> a FAISS index (``indexes/<model>/<version>/``), as the chain's index stage."""
from __future__ import annotations

import argparse
from typing import Any

from encoders.model.ranker_registry import CHAMPION_URI as CHAMPION
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``index`` to the CLI."""
    ix = subparsers.add_parser(
        "index", parents=[common], help="build the vector index of a model's corpus titles",
        description="Read every corpus title's vector from the store's vectors of the model (encoding only the titles "
        "no stage encoded yet) into a FAISS index of unit vectors: exact (IndexFlatIP) up to 20,000 titles, IVF over fp16 codes "
        "with nprobe tuned to recall@10 >= 0.97 on training click queries above, and BM25; writes a new build indexes/<model>/<version>/builds/<id>/{index.faiss,"
        "ids.parquet,bm25/,manifest.json} beside the live one and switches it in by rewriting current.json "
        "(a killed run leaves the old build serving).",
    )
    ix.add_argument("--model-uri", default=CHAMPION, help=f"runs:/<id>/model, models:/<name>/<N> or @alias (default {CHAMPION})")
    ix.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the IVF training sample and k-means (default {SEED})")
    ix.set_defaults(handler=run_index)


def run_index(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Build the index and say where it is."""
    from encoders.search.served_index import ServedIndex
    from eval.decisions.gate_set import served_decision

    return ServedIndex.build(settings, args.model_uri, seed=args.seed, decision=served_decision(settings)).to_dict()
