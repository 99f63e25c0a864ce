"""``deepsent promote``: gate a model against the champion of ``deepsent-ranker`` and promote it, or roll back."""
from __future__ import annotations

import argparse
from typing import Any

from deepsent.flag_rules import refuse_unused
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED

#: Decisions ``--status`` shows by default, and at most.
LAST, MAX_LAST = 10, 1000


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ``promote`` command."""
    p = subparsers.add_parser(
        "promote", parents=[common], help="gate a model against the champion; promote it to deepsent-ranker@champion",
        description="Registers the model as a version of deepsent-ranker (an MLflow pyfunc: texts -> vectors), "
        "aliases it challenger and scores it and the champion on the gate set in one paired comparison "
        "(NDCG@1/3/10, paired t-test over queries): by default the held-out click lists of the latest ship "
        "features (clicks never trained on, not the reported judged set). It becomes the champion when there is none, or when it is "
        "not significantly worse at any cutoff and better at --metric; otherwise the champion stays and the "
        "reason gives both figures and the p-values. The gate set decides what ships: do not tune on it. "
        "Every decision is an MLflow run (experiment deepsent-promotion) and tags on the model version.",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--status", action="store_true",
                        help="show the champion, its age, the last challengers and why each was refused")
    target.add_argument("--model-uri", help="runs:/<id>/model, models:/<name>/<N> or @alias, or a run id")
    target.add_argument("--version", type=v.positive_int, help="make ranker version N the champion (rollback)")
    gate = p.add_mutually_exclusive_group()
    gate.add_argument("--gate-judgments", help="the gate set: gate-slice (the demo's golden set), clicks (the held-out "
                      "click lists) or a judged file of your own (default DEEPSENT_GATE_JUDGMENTS, else gate-slice); a "
                      "set sharing a query with the reported dev set or the simulator's source is refused")
    gate.add_argument("--gate-features", help="features/<version> whose held-out click lists gate (as --gate-judgments "
                      "clicks, with these features instead of the n=4 skipped features of the latest pairs)")
    p.add_argument("--last", type=v.up_to(MAX_LAST), default=None,
                   help=f"with --status: decisions shown (default {LAST}, at most {MAX_LAST:,})")
    p.add_argument("--metric", default=None, help="the metric the challenger must improve: ndcg@1, ndcg@3 "
                   "or ndcg@10 (default)")
    p.add_argument("--force", action="store_true", help="promote even when the gate refuses (recorded as forced)")
    p.add_argument("--seed", type=v.seed, default=None, help=f"seed of the bootstrap CIs (default {SEED})")
    p.set_defaults(handler=run_promote, reads_only=lambda args: args.status)


def run_promote(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Handler of ``deepsent promote``."""
    from eval.promotion.gate import DEFAULT_METRIC
    from eval.promotion.promote import promote
    from eval.promotion.status import champion_status

    _refuse_unused_flags(args)
    if args.status:
        return champion_status(settings, last=args.last or LAST).to_dict()
    result = promote(settings, model_uri=args.model_uri, gate_judgments=args.gate_judgments, force=args.force,
                     version=None if args.version is None else str(args.version), metric=args.metric or DEFAULT_METRIC,
                     seed=SEED if args.seed is None else args.seed, gate_features=args.gate_features)
    return result.to_dict()


def _refuse_unused_flags(args: argparse.Namespace) -> None:
    """A ConfigError for a flag the chosen mode (--status, --version or --model-uri) would ignore."""
    gating = ("gate_judgments", "gate_features", "metric", "force", "seed")
    if args.status:
        refuse_unused(args, "--status", gating, "--status only shows the champion and the last decisions (--last)")
    elif args.version is not None:
        refuse_unused(args, "--version", (*gating, "last"), "--version sets the champion by hand, with no gate")
    else:
        refuse_unused(args, "--model-uri", ("last",), "--last says how many decisions --status shows")
