"""``deepsent ensemble``: join a trained LSTM-RNN with MiniLM in one registered model (mix chosen on the decision set)."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ``ensemble`` command."""
    p = subparsers.add_parser(
        "ensemble", parents=[common], help="join a trained LSTM-RNN with MiniLM in one model, mix chosen on the decision set",
        description="Scores the decision set (the gate set of DEEPSENT_GATE_JUDGMENTS or --gate-judgments: the "
        "demo's gate slice by default, a judged file, or 'clicks' for the held-out click lists of "
        "--features-version) with a trained LSTM-RNN and with MiniLM (a fine-tuned minilm run, or the packaged "
        "all-MiniLM-L6-v2), picks the smallest LSTM-RNN share of their cosines within one standard error of the "
        "best NDCG@10 (0, MiniLM alone, unless it beats MiniLM by a bootstrap CI above zero), and logs and "
        "registers (deepsent-ensemble) one model whose vectors give exactly that mixed score. The reported dev "
        "set is never read.",
    )
    p.add_argument("--lstm", required=True, help="the LSTM-RNN: runs:/<id>/model, models:/<name>/<N>, or a run id")
    p.add_argument("--minilm", help="a fine-tuned minilm run (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--features-version", required=True, type=v.features_version,
                   help="features whose validation click lists fit the mix (e.g. built with --negative-source skipped)")
    p.add_argument("--gate-judgments", help="the decision set: gate-slice, clicks or a judged file (default "
                   "DEEPSENT_GATE_JUDGMENTS, else gate-slice)")
    p.set_defaults(handler=run_ensemble)


def run_ensemble(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Handler of ``deepsent ensemble``."""
    from encoders.training.ensemble_build import build_ensemble
    from eval.decisions.gate_set import decision_set
    from eval.decisions.mix import MixDecider

    decider = MixDecider(decision_set(settings, args.features_version, args.gate_judgments))
    return build_ensemble(settings, args.lstm, args.features_version, decider, minilm_uri=args.minilm).to_dict()
