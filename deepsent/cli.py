"""The ``deepsent`` command line: parses flags, runs one stage, prints a summary or one JSON object.

Each command lives in ``deepsent/commands/<command>.py`` and exposes
``register(subparsers, common)``; handlers take ``(args, settings)`` and return a dict that is
printed readably, or as exactly one JSON object on stdout with ``--json``. Progress and logs go
to stderr so that stdout stays machine-readable.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any, Callable, Sequence

from deepsent import log_setup
from pipeline.core.config import Settings, check_tracking_server
from pipeline.core.errors import DeepsentError
from pipeline.runtime.interrupt import Terminated, exit_code, sigterm_raises

# OpenMP threads that spin while waiting slow torch down several-fold on a busy 2-core machine;
# a passive wait costs nothing measurable when the machine is idle. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Loading a model downloads its artifacts; MLflow's per-file progress bars would bury our own log.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

#: Commands, one module each (``deepsent/commands/<command>.py``), in the order ``deepsent --help`` lists them.
COMMAND_MODULES = (
    "run",
    "simulate",
    "ingest",
    "pairs",
    "featurize",
    "train",
    "embed",
    "ensemble",
    "compare",
    "analyze",
    "promote",
    "stack",
    "index",
    "search",
    "serve",
)

Handler = Callable[[argparse.Namespace, Settings], dict[str, Any]]


class UsageError(Exception):
    """A command-line mistake found by argparse (bad flag, choice, type or a missing argument)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors reach :func:`main` (one line, ``--json`` honoured) instead of exiting."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        """Raise the argument error for :func:`main` to report."""
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _common_parser(top_level: bool) -> argparse.ArgumentParser:
    """Options accepted before and after the command name.

    The copy given to sub-commands has no defaults (SUPPRESS), so ``deepsent --json train``
    and ``deepsent train --json`` both work: a sub-command never resets a top-level flag.
    """
    default: dict[str, object] = {} if top_level else {"default": argparse.SUPPRESS}
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout", **default)
    common.add_argument("--store", help="store root: a directory or s3://bucket/prefix (env DEEPSENT_STORE)", **default)
    common.add_argument("--data-dir", help="shared data folder (env DEEPSENT_DATA_DIR)", **default)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging on stderr, other libraries' logs and warnings included", **default)
    return common


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every available command registered."""
    common = _common_parser(top_level=False)
    parser = Parser(
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
    for command in sub.choices.values():
        _state_caps(command)
    return parser


def _state_caps(parser: argparse.ArgumentParser) -> None:
    """Add each capped flag's upper bound (its validator's ``cap``) to its help, where it applies."""
    for action in parser._actions:
        cap = getattr(action.type, "cap", None)
        if cap is None or not action.help or cap in action.help:
            continue
        action.help = action.help[:-1] + f", {cap})" if action.help.endswith(")") else f"{action.help} ({cap})"


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
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _fail(argparse.Namespace(json="--json" in argv), str(exc))
    log_setup.configure(args.verbose)
    if not getattr(args, "handler", None):
        if args.json:
            return _fail(args, "no command given (see 'deepsent --help')")
        parser.print_help(sys.stderr)
        return 2
    try:
        settings = Settings.from_env(store=args.store, data_dir=args.data_dir)
        if getattr(args, "uses_store", True):
            from pipeline.storage.store import Store  # pyarrow: loaded only for commands that need the store

            reads_only = getattr(args, "reads_only", None)  # a command that only reads serves a read-only store
            Store.from_settings(settings).check(write=not (reads_only and reads_only(args)))
            check_tracking_server(settings.mlflow_tracking_uri)
        with sigterm_raises():  # SIGTERM (Airflow, Kubernetes) stops a command like Ctrl-C
            result = args.handler(args, settings)
    except DeepsentError as exc:
        return _fail(args, str(exc))
    except Exception as exc:
        message = storage_error(exc, settings.mlflow_tracking_uri if "settings" in locals() else "")
        if message is None:
            raise
        return _fail(args, message)
    except KeyboardInterrupt as exc:
        _fail(args, "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted")
        return exit_code(exc)
    if args.json:
        sys.stdout.write(json.dumps({k: v for k, v in result.items() if k != "summary"}, default=str) + "\n")
    else:
        print(format_summary(result))
    return 0


def storage_error(exc: BaseException, tracking_uri: str) -> str | None:
    """One line for a store or MLflow database the disk refuses (read-only, full, locked, no permission);
    None for anything else (a bug keeps its traceback)."""
    from pipeline.storage.filesystems import WRITE_ERRNOS

    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        return f"{exc.filename or 'a file'}: cannot write ({os.strerror(exc.errno or 0).lower()})"
    text = str(exc)
    for needle, reason in (("readonly database", "the database is read-only"), ("database is locked", "the database "
                           "is locked by another process"), ("unable to open database", "the database cannot be opened")):
        if needle in text:
            return f"MLflow tracking store {tracking_uri}: {reason}; check the file's folder and permissions"
    return None


def _fail(args: argparse.Namespace, message: str) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps({"error": message}) + "\n")
    print(f"deepsent: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
