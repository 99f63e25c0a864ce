"""``deepsent ingest``: landing logs -> validated, de-duplicated, de-botted ``clicks/`` partitions."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``ingest`` to the CLI."""
    ing = subparsers.add_parser(
        "ingest", parents=[common], help="validate, normalise, de-duplicate and de-bot landing logs into clicks/",
        description="Ingest landing/clicks/dt=D/ into clicks/dt=D/part-0.parquet; rejected rows go to "
        "quarantine/ingest/dt=D/. The day's catalogue files (landing/catalog/dt=D/: snapshot* files or deltas) "
        "give catalog/dt=D/ and catalog/changes/dt=D/ (rejected rows: quarantine/catalog/dt=D/); a day may hold "
        "only a catalogue. Re-running a date replaces its partitions.",
    )
    when = ing.add_mutually_exclusive_group(required=True)
    when.add_argument("--date", type=v.iso_date, help="one day, YYYY-MM-DD")
    when.add_argument("--start", type=v.iso_date, help="first day of a range (with --end)")
    ing.add_argument("--end", type=v.iso_date, help="last day of the range, inclusive")
    ing.add_argument("--engine", choices=("arrow", "per-line"), default="arrow",
                     help="arrow (default): column-wise; per-line: the reference path, row by row (same output bytes)")
    ing.add_argument("--allow-mass-retire", action="store_true",
                     help="let a catalogue snapshot retire more than half of the live catalogue (refused by default: "
                     "a feed that broke must not empty the index)")
    ing.set_defaults(handler=run_ingest)


def run_ingest(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Ingest one date or an inclusive range of dates."""
    from pipeline.ingest.ingest import ingest_dates

    if args.date is not None:
        if args.end is not None:
            raise ConfigError("--end goes with --start, not with --date")
        dates = [args.date]
    else:
        if args.end is None:
            raise ConfigError("--start needs --end (the last day, inclusive)")
        dates = v.date_range(args.start, args.end, "--start", "--end")
    result = ingest_dates(settings, dates, engine=args.engine, allow_mass_retire=args.allow_mass_retire)
    lines = [
        f"ingested {len(result['dates'])} date(s) {result['dates'][0]} .. {result['dates'][-1]}",
        f"  rows read {result['rows_read']:,} = accepted {result['accepted']:,} + quarantined "
        f"{result['quarantined']:,} + duplicates {result['duplicates']:,} + bot rows {result['bot_rows']:,}",
        f"  bots: {result['bot_users']} user(s); rule: {result['bot_rule']}",
        f"  wrote clicks/dt=.../part-0.parquet, quarantine/ingest/dt=.../part-0.parquet and "
        f"clicks/_manifests/dt=....json under {settings.store}",
    ]
    for date in result["dates"]:
        counts = result["per_date"].get(date)
        if counts is None:
            lines.append(f"  {date}: no click files (the catalogue only)")
            continue
        reasons = ", ".join(f"{k} {v}" for k, v in counts["quarantine_reasons"].items()) or "none"
        lines.append(
            f"  {date}: read {counts['rows_read']:,}, accepted {counts['accepted']:,}, quarantined "
            f"{counts['quarantined']} ({reasons}), duplicates {counts['duplicates']}, bot rows {counts['bot_rows']}"
        )
    lines += [catalog_line(date, counts) for date, counts in result["catalog"].items()]
    return {**result, "summary": "\n".join(lines)}


def catalog_line(date: str, counts: dict[str, Any]) -> str:
    """One summary line of a day's catalogue manifest."""
    if counts["kind"] == "carried":
        return (f"  catalogue {date}: no catalogue file; kept the catalogue of {counts['carried_from']} "
                f"({counts['products']:,} products)")
    reasons = ", ".join(f"{k} {v}" for k, v in counts["quarantine_reasons"].items()) or "none"
    return (f"  catalogue {date} ({counts['kind']}): rows in {counts['rows_in']:,} = kept {counts['kept']:,} + "
            f"quarantined {counts['quarantined']:,} ({reasons}); launches {counts['launches']:,}, edits "
            f"{counts['edits']:,}, retirements {counts['retirements']:,}, unchanged {counts['unchanged']:,}; "
            f"{counts['products']:,} products")
