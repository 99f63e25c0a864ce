"""Where the CLI's log lines go: stderr, the project's INFO lines always, other libraries' only with ``-v``.

Without ``-v`` other libraries' log records and Python warnings stay out of the output whatever their level:
a failure the CLI reports as one line (a read-only MLflow database, say) is not preceded by the library's
own ERROR record and traceback, and advice meant for library users (MLflow's type-hint warning) is not
printed on every ``train``. MLflow gives its loggers a stderr handler of their own when it is imported, so
they are handed to ours at that moment (:class:`_AfterImport`); its ``eprint`` lines go with them. Escape
codes (MLflow colours its warnings) are taken out of every line: stderr is a log, often a file.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import re
import sys
from typing import Any, Callable

#: Top-level packages of the project: their INFO lines show; other libraries' only with -v.
PROJECT_LOGGERS = ("deepsent", "pipeline", "encoders", "eval", "dags", "infra")
_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _PlainFormatter(logging.Formatter):
    """The usual format, with terminal escape codes removed."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record without escape codes."""
        return _ESCAPES.sub("", super().format(record))


def is_project_record(record: logging.LogRecord) -> bool:
    """True for a record of the project's own loggers."""
    return record.name.split(".")[0] in PROJECT_LOGGERS


def configure(verbose: bool) -> None:
    """Log to stderr: the project's INFO lines; with ``verbose`` everything from DEBUG, libraries included."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "0" if verbose else "1")  # the "Loading weights" bars
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PlainFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        # A library may set its own logger to DEBUG (bm25s does), so the source is checked here, at the handler.
        handler.addFilter(is_project_record)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger: a library's, shown with -v
    after_import("mlflow", lambda: _adopt_mlflow_loggers(verbose))


def _adopt_mlflow_loggers(verbose: bool) -> None:
    """MLflow's loggers propagate to our handler instead of writing to stderr themselves."""
    from mlflow.utils import logging_utils

    from encoders.model.tracking import adopt_mlflow_loggers

    adopt_mlflow_loggers()
    if not verbose:
        logging_utils.disable_logging()  # its eprint lines ("Successfully registered model ...")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then`` right after module ``name`` is first imported (once)."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        """The module's usual spec, its loader made to call ``then`` once the module has run."""
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            self.then()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def after_import(name: str, then: Callable[[], None]) -> None:
    """Call ``then`` now when module ``name`` is loaded, else right after its first import."""
    if name in sys.modules:
        then()
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))
