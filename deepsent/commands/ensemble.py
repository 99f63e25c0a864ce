"""``deepsent ensemble``: join a trained LSTM-RNN with MiniLM in one registered model (mix fitted on clicks)."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ``ensemble`` command."""
    p = subparsers.add_parser(
        "ensemble", parents=[common], help="join a trained LSTM-RNN with MiniLM in one model, mix fitted on clicks",
        description="Scores the held-out click lists of a features version with a trained LSTM-RNN and with "
        "MiniLM (a fine-tuned minilm run, or the packaged all-MiniLM-L6-v2), picks the mix of their cosines with "
        "the best click MRR, and logs and registers (deepsent-ensemble) one model whose vectors give exactly "
        "that mixed score: it serves, embeds, indexes and compares like any trained model. Features cut with "
        "--negative-source skipped rank the clicked title among titles the log showed and nobody clicked. "
        "No judged set is read.",
    )
    p.add_argument("--lstm", required=True, help="the LSTM-RNN: runs:/<id>/model, models:/<name>/<N>, or a run id")
    p.add_argument("--minilm", help="a fine-tuned minilm run (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--features-version", required=True, type=v.features_version,
                   help="features whose validation click lists fit the mix (e.g. built with --negative-source skipped)")
    p.set_defaults(handler=run_ensemble)


def run_ensemble(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Handler of ``deepsent ensemble``."""
    from encoders.training.ensemble_build import build_ensemble

    return build_ensemble(settings, args.lstm, args.features_version, minilm_uri=args.minilm).to_dict()
