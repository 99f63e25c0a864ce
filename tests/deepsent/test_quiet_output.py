"""Without ``-v`` the CLI prints the project's lines only: no MLflow INFO lines, no library warnings (MLflow colours
its own), no library ERROR record with a traceback before the one-line error; ``promote --status`` on a new
registry reads it as empty without creating it. Each case runs the real console script in a fresh process.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from pipeline.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEEPSENT = str(Path(sys.executable).with_name("deepsent"))
#: A line of the project's log: ``2026-01-01 10:00:00,000 LEVEL <project logger>: ...``.
PROJECT_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ (INFO|WARNING|ERROR) (deepsent|pipeline|encoders|eval)\.")


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``argv`` in a fresh process at the repository root (``PYTHONPATH`` the checkout)."""
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_train_prints_only_the_project_lines(train_settings: Settings) -> None:
    done = _run([DEEPSENT, "train", "--model", "lstm", "--ncell", "8", "--epochs", "1", "--store", train_settings.store],
                {"MLFLOW_TRACKING_URI": train_settings.mlflow_tracking_uri})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert lines and all(PROJECT_LINE.match(line) for line in lines), done.stderr  # no mlflow INFO, no UserWarning
    assert "\x1b[" not in done.stderr and "trained LSTM-RNN" in done.stdout


@pytest.mark.heavy  # over 10 s: left out of make check
def test_library_logs_and_warnings_show_with_verbose_only(tmp_path: Path) -> None:
    """MLflow's own loggers (handed to ours when it loads), a library ERROR with a traceback and a coloured warning."""
    script = textwrap.dedent("""
        import logging, sys
        import pipeline.features.pairs
        from deepsent.cli import main
        from pipeline.core.errors import ConfigError

        def chatty(settings, **kwargs):
            from mlflow.utils.warnings_utils import color_warning
            logging.getLogger("mlflow.store.db.utils").info("Creating initial MLflow database tables...")
            try:
                raise RuntimeError("inner failure")
            except RuntimeError:
                logging.getLogger("mlflow.store.db.utils").exception("SQLAlchemy database error")
            color_warning("Add type hints to the predict method", stacklevel=1, color="yellow")
            logging.getLogger("pipeline.features.pairs").info("project line")
            raise ConfigError("stop here")

        pipeline.features.pairs.build_pairs = chatty
        sys.exit(main(sys.argv[1:]))
    """)
    quiet, verbose = (_run([sys.executable, "-c", script, "pairs", *flag], {"DEEPSENT_STORE": str(tmp_path)})
                      for flag in ((), ("-v",)))
    assert quiet.returncode == verbose.returncode == 2
    lines = quiet.stderr.splitlines()
    assert len(lines) == 2 and "project line" in lines[0] and lines[1] == "deepsent: error: stop here", quiet.stderr
    for shown in ("Creating initial MLflow database tables", "SQLAlchemy database error", "Traceback",
                  "Add type hints to the predict method"):
        assert shown in verbose.stderr, shown
    assert "\x1b[" not in verbose.stderr  # the warning's colour codes are taken out


def test_train_on_a_read_only_mlflow_database_is_one_line(make_train_settings: Callable[[str], Settings],
                                                          small_disk: Path) -> None:
    settings = make_train_settings("read-only")
    db = small_disk / "mlflow.db"
    db.write_bytes(Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///")).read_bytes())
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    uri = f"sqlite:///{db}"
    done = _run([DEEPSENT, "train", "--model", "lstm", "--ncell", "8", "--epochs", "1", "--store", settings.store],
                {"MLFLOW_TRACKING_URI": uri})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"deepsent: error: MLflow tracking store {uri}: the database is read-only; "
                                        "check the file's folder and permissions"], done.stderr


def test_status_of_a_new_registry_creates_nothing_and_logs_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = tmp_path / "new-store"
    done = _run([DEEPSENT, "promote", "--status", "--store", str(store)])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "no champion yet (deepsent-ranker@champion is not set)\n"
    assert not (store / "mlflow.db").exists()
