"""``deepsent simulate``, ``deepsent ingest`` and ``deepsent pairs``: from click logs to training pairs."""
from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from pipeline import validators as v
from pipeline.config import Settings
from pipeline.defaults import SEED
from pipeline.errors import ConfigError


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``simulate``, ``ingest`` and ``pairs`` to the CLI."""
    sim = subparsers.add_parser(
        "simulate", parents=[common], help="write simulated search-impression logs to landing/clicks/",
        description="Turn judgments_train.csv (only it) into one landing partition per day, and print the "
        "click statistics beside those of the real TREC 2013 Session log.",
    )
    sim.add_argument("--start", type=v.iso_date, default=dt.date(2026, 1, 1), help="first day, YYYY-MM-DD (default 2026-01-01)")
    sim.add_argument("--days", type=v.positive_int, default=30, help="number of days (default 30)")
    sim.add_argument("--seed", type=v.seed, default=SEED, help=f"random seed; the same seed gives the same bytes (default {SEED})")
    sim.add_argument("--format", dest="fmt", default="jsonl", choices=["jsonl", "csv", "tsv", "parquet"],
                     help="landing file format (default jsonl)")
    sim.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="override a simulator knob (pipeline.simulate.SimParams), e.g. searches_per_day=500")
    sim.set_defaults(handler=run_simulate)

    ing = subparsers.add_parser(
        "ingest", parents=[common], help="validate, normalise, de-duplicate and de-bot landing logs into clicks/",
        description="Ingest landing/clicks/dt=D/ into clicks/dt=D/part-0.parquet; rejected rows go to "
        "quarantine/ingest/dt=D/. Re-running a date replaces its partition.",
    )
    when = ing.add_mutually_exclusive_group(required=True)
    when.add_argument("--date", type=v.iso_date, help="one day, YYYY-MM-DD")
    when.add_argument("--start", type=v.iso_date, help="first day of a range (with --end)")
    ing.add_argument("--end", type=v.iso_date, help="last day of the range, inclusive")
    ing.add_argument("--engine", choices=("arrow", "per-line"), default="arrow",
                     help="arrow (default): column-wise; per-line: the reference path, row by row (same output bytes)")
    ing.set_defaults(handler=run_ingest)

    pairs = subparsers.add_parser(
        "pairs", parents=[common], help="clicked (query, title) pairs split train/valid by query",
        description="Aggregate every ingested clicks/ partition into pairs/train.parquet and pairs/valid.parquet.",
    )
    pairs.add_argument("--valid-fraction", type=v.fraction, default=0.1, help="share of queries held out (default 0.1)")
    pairs.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the query split hash (default {SEED})")
    pairs.set_defaults(handler=run_pairs)


def run_simulate(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Simulate the landing logs and compare their click statistics with TREC 2013."""
    from pipeline.clickstats import format_comparison
    from pipeline.simulate import SimParams, simulate

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
            "",
            format_comparison({"simulated": result["stats"]["simulated"], "TREC 2013": trec}),
            "(simulated: people's searches only; TREC 2013: the real Session track log"
            + ("" if trec else f", not found at {settings.trec_session_xml}") + ")",
        ]
    )
    return {**result, "summary": summary}


def run_ingest(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Ingest one date or an inclusive range of dates."""
    from pipeline.ingest import ingest_dates

    if args.date is not None:
        if args.end is not None:
            raise ConfigError("--end goes with --start, not with --date")
        dates = [args.date]
    else:
        if args.end is None:
            raise ConfigError("--start needs --end (the last day, inclusive)")
        dates = v.date_range(args.start, args.end, "--start", "--end")
    result = ingest_dates(settings, dates, engine=args.engine)
    lines = [
        f"ingested {len(result['dates'])} date(s) {result['dates'][0]} .. {result['dates'][-1]}",
        f"  rows read {result['rows_read']:,} = accepted {result['accepted']:,} + quarantined "
        f"{result['quarantined']:,} + duplicates {result['duplicates']:,} + bot rows {result['bot_rows']:,}",
        f"  bots: {result['bot_users']} user(s); rule: {result['bot_rule']}",
        f"  wrote clicks/dt=.../part-0.parquet, quarantine/ingest/dt=.../part-0.parquet and "
        f"clicks/_manifests/dt=....json under {settings.store}",
    ]
    for date, counts in result["per_date"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in counts["quarantine_reasons"].items()) or "none"
        lines.append(
            f"  {date}: read {counts['rows_read']:,}, accepted {counts['accepted']:,}, quarantined "
            f"{counts['quarantined']} ({reasons}), duplicates {counts['duplicates']}, bot rows {counts['bot_rows']}"
        )
    return {**result, "summary": "\n".join(lines)}


def run_pairs(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Build the train/valid pair files from every ingested date."""
    from pipeline.pairs import build_pairs

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


def _key_value(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep:
        raise ConfigError(f"--param {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()
