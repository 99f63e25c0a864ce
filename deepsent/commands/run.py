"""`deepsent run [--profile quick|full]`: the main job, every stage in order."""
from __future__ import annotations

import argparse
import re
from typing import Any

from deepsent.chain import CHAIN
from deepsent.chain_results import SIMULATION_START
from deepsent.profiles import DEFAULT_PROFILE, PROFILES
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import DEVICES, SEED


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", parents=[common], help="the main job: " + ", ".join(s.name for s in CHAIN),
                       description="The main job: every stage of the chain (deepsent/chain.py), in order.",
                       epilog=chain_listing(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", choices=tuple(PROFILES), default=DEFAULT_PROFILE,
                   help="quick: LSTM-RNN + DSSM, the ensemble and every baseline; full: the whole Table IV grid")
    p.add_argument("--start", type=v.iso_date, default=SIMULATION_START, help="first simulated day")
    p.add_argument("--seed", type=v.seed, default=SEED)
    p.add_argument("--device", choices=DEVICES, help="training device (env DEEPSENT_DEVICE)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run: finished models are reused, the others resume from their checkpoint")
    p.set_defaults(handler=handle)


def first_sentence(doc: str) -> str:
    """The first sentence of a stage's doc."""
    return re.split(r"(?<=\.)\s", doc, maxsplit=1)[0]


def chain_listing() -> str:
    """The chain's stages as ``deepsent run --help`` lists them: name and the first sentence of its doc."""
    width = max(len(s.name) for s in CHAIN) + 2
    lines = [f"  {s.name:<{width}}{first_sentence(s.doc)}{' (once per grid point)' if s.mapped else ''}" for s in CHAIN]
    return "stages, in order (the retrain DAG runs the same, one task each):\n" + "\n".join(lines)


def handle(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Run the profile and return its result with a readable summary."""
    from deepsent.runner import run, summary

    result = run(settings.with_overrides(device=args.device), args.profile, start=args.start, seed=args.seed,
                 resume=args.resume)
    return {**result, "summary": summary(result)}
