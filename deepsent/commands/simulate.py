"""``deepsent simulate``: simulated search-impression logs into ``landing/clicks/``, with click statistics."""
from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.simulate.sim_params import MAX_DAYS


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``simulate`` to the CLI."""
    sim = subparsers.add_parser(
        "simulate", parents=[common], help="write simulated search-impression logs to landing/clicks/",
        description="Turn judgments_train.csv (only it) into one landing partition per day, and print the "
        "click statistics beside those of the real TREC 2013 Session log.",
    )
    sim.add_argument("--start", type=v.iso_date, default=dt.date(2026, 1, 1), help="first day, YYYY-MM-DD (default 2026-01-01)")
    sim.add_argument("--days", type=v.number(int, f"a number of days from 1 to {MAX_DAYS}", 1, MAX_DAYS), default=30,
                     help=f"number of days (default 30, at most {MAX_DAYS}; the store's free space is checked first)")
    sim.add_argument("--seed", type=v.seed, default=SEED, help=f"random seed; the same seed gives the same bytes (default {SEED})")
    sim.add_argument("--format", dest="fmt", default="jsonl", choices=["jsonl", "csv", "tsv", "parquet"],
                     help="landing file format (default jsonl)")
    sim.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="override a simulator knob (pipeline.simulate.sim_params.SimParams), e.g. searches_per_day=500")
    sim.set_defaults(handler=run_simulate)


def run_simulate(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Simulate the landing logs and compare their click statistics with TREC 2013."""
    from pipeline.simulate.clickstats import format_comparison
    from pipeline.simulate.sim_params import SimParams
    from pipeline.simulate.simulate import simulate

    overrides = dict(_key_value(item) for item in args.param)
    params = SimParams().with_overrides(overrides)
    result = simulate(settings, args.start, args.days, seed=args.seed, params=params, fmt=args.fmt)
    first, last = result["partitions"][0], result["partitions"][-1]
    trec = result["stats"]["trec2013"]
    summary = "\n".join(
        [
            f"simulated {result['days']} day(s) from {result['start']} (seed {result['seed']}, {result['format']}): "
            f"{result['lines']:,} lines in {len(result['partitions'])} partition(s)",
            f"  {first}" + (f"\n  ... {last}" if last != first else ""),
            f"  people: {result['searches']:,} searches, {result['queries_issued']:,} of "
            f"{result['queries_available']:,} training queries issued",
            f"  bots: {result['bot_searches']:,} searches, {result['bot_rows']:,} rows; "
            f"malformed lines: {result['malformed_lines']}; duplicated lines: {result['duplicate_lines']}",
            *_catalog_lines(result),
            "",
            format_comparison({"simulated": result["stats"]["simulated"], "TREC 2013": trec}),
            "(simulated: people's searches only; TREC 2013: the real Session track log"
            + ("" if trec else f", not found at {settings.trec_session_xml}") + ")",
        ]
    )
    return {**result, "summary": summary}


def _catalog_lines(result: dict[str, Any]) -> list[str]:
    """The catalogue feed's line, when the knob catalog_feed wrote one."""
    if "catalog_counts" not in result:
        return []
    counts = result["catalog_counts"]
    return [f"  catalogue: {len(result['catalog_files'])} file(s) in landing/catalog/; a snapshot of "
            f"{counts['snapshot_products']:,} products, then {counts['launches']:,} launches, {counts['edits']:,} "
            f"edits, {counts['retirements']:,} retirements"]


def _key_value(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep:
        raise ConfigError(f"--param {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()
