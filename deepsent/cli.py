"""The ``deepsent`` command line: parses flags, runs one stage, prints a summary or one JSON object.

Each command group lives in ``deepsent/commands/<group>.py`` and exposes
``register(subparsers, common)``; handlers take ``(args, settings)`` and return a dict that is
printed readably, or as exactly one JSON object on stdout with ``--json``. Progress and logs go
to stderr so that stdout stays machine-readable.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from typing import Any, Callable, Sequence

from deepsent.interrupt import Terminated, exit_code, sigterm_raises
from pipeline.config import Settings
from pipeline.errors import DeepsentError

# OpenMP threads that spin while waiting slow torch down several-fold on a busy 2-core machine;
# a passive wait costs nothing measurable when the machine is idle. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Loading a model downloads its artifacts; MLflow's per-file progress bars would bury our own log.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

#: Command groups, in the order they appear in ``deepsent --help``.
COMMAND_MODULES = (
    "run",
    "ingest",
    "features",
    "train",
    "compare",
    "analyze",
    "stack",
)

Handler = Callable[[argparse.Namespace, Settings], dict[str, Any]]


def _common_parser(top_level: bool) -> argparse.ArgumentParser:
    """Options accepted before and after the command name.

    The copy given to sub-commands has no defaults (SUPPRESS), so ``deepsent --json train``
    and ``deepsent train --json`` both work: a sub-command never resets a top-level flag.
    """
    default: dict[str, object] = {} if top_level else {"default": argparse.SUPPRESS}
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout", **default)
    common.add_argument("--store", help="store root: a directory or s3://bucket/prefix (env DEEPSENT_STORE)", **default)
    common.add_argument("--data-dir", help="shared data folder (env DEEPSENT_DATA_DIR)", **default)
    common.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr", **default)
    return common


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every available command group registered."""
    common = _common_parser(top_level=False)
    parser = argparse.ArgumentParser(
        prog="deepsent",
        description="Search click logs -> sentence-embedding rankers (Palangi et al. 2016, LSTM-DSSM).",
        parents=[_common_parser(top_level=True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"deepsent.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"deepsent.commands.{name}":
                continue
            raise
        module.register(sub, common)
    return parser


def format_summary(result: dict[str, Any]) -> str:
    """Readable rendering of a handler's result: its ``summary`` text, else key: value lines."""
    if "summary" in result:
        return str(result["summary"])
    lines = []
    for key, value in result.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, default=str)
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deepsent`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        settings = Settings.from_env(store=args.store, data_dir=args.data_dir)
        with sigterm_raises():  # SIGTERM (Airflow, Kubernetes) stops a command like Ctrl-C
            result = args.handler(args, settings)
    except DeepsentError as exc:
        return _fail(args, str(exc))
    except KeyboardInterrupt as exc:
        _fail(args, "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted")
        return exit_code(exc)
    if args.json:
        sys.stdout.write(json.dumps({k: v for k, v in result.items() if k != "summary"}, default=str) + "\n")
    else:
        print(format_summary(result))
    return 0


def _fail(args: argparse.Namespace, message: str) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps({"error": message}) + "\n")
    print(f"deepsent: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
