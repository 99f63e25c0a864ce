"""`deepsent run [--profile quick|full] [--from-landing [--start D] [--end D]]`: the main job, every stage in order."""
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
from pipeline.core.errors import ConfigError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", parents=[common], help="the main job: " + ", ".join(s.name for s in CHAIN),
                       description="The main job: every stage of the chain (deepsent/chain.py), in order.",
                       epilog=chain_listing(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", choices=tuple(PROFILES), default=DEFAULT_PROFILE,
                   help="quick: LSTM-RNN + DSSM, the ensemble and every baseline; full: the whole Table IV grid")
    p.add_argument("--start", type=v.iso_date, help=f"first simulated day (default {SIMULATION_START}); with "
                   "--from-landing, the first landed day to ingest (default: the first landed)")
    p.add_argument("--from-landing", action="store_true",
                   help="simulate nothing: ingest the landing area as it is (every day with files in "
                   "landing/clicks/dt=D/ or landing/catalog/dt=D/, within --start/--end), then the rest of the chain")
    p.add_argument("--end", type=v.iso_date, help="with --from-landing: the last landed day to ingest (default: the last)")
    p.add_argument("--seed", type=v.seed, default=SEED)
    p.add_argument("--device", choices=DEVICES, help="training device (env DEEPSENT_DEVICE)")
    p.add_argument("--gate-judgments", help="the judged set every decision is made on: gate-slice (the demo's golden "
                   "set, the default), a judged file of your own, or clicks (the held-out click lists); env "
                   "DEEPSENT_GATE_JUDGMENTS")
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

    settings = settings.with_overrides(device=args.device, gate_judgments=args.gate_judgments)
    landed = None
    if args.from_landing:
        from deepsent.landed import landed_days

        landed = landed_days(settings, args.start, args.end)
    elif args.end is not None:
        raise ConfigError("--end goes with --from-landing (the last landed day); a simulated run's length is its profile's")
    result = run(settings, args.profile, start=args.start or SIMULATION_START, seed=args.seed, resume=args.resume,
                 landed=landed)
    return {**result, "summary": summary(result)}
