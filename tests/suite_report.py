"""A pytest plugin: the suite's counts, time and slowest tests as JSON (``DEEPSENT_SUITE_REPORT=PATH``).

``infra/test.sh`` sets the path (``.deepsent/suite-report.json`` by default) and the install time it
measured; ``python -m docs_render --suite-from PATH`` copies the file to ``docs/results/suite.json``, from which
the README's figures are rendered. Works with and without pytest-xdist: only the controlling process
writes, from the reports its workers send back.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

SLOWEST = 10
_durations: dict[str, float] = defaultdict(float)
_outcomes: dict[str, str] = {}
_started = time.time()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the clock when the session starts (collection included, as pytest's own summary counts it)."""
    global _started
    _started = time.time()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's seconds to its test; a failure in any phase fails the test, a skip skips it."""
    _durations[report.nodeid] += report.duration
    previous = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and previous != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and previous is None:
        _outcomes[report.nodeid] = "passed"


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parents[1])
    except OSError:
        return None
    return done.stdout.strip() or None


def _seconds_from_env(name: str) -> float | None:
    value = os.environ.get(name, "")
    try:
        return round(float(value), 1)
    except ValueError:
        return None


def report(workers: int) -> dict[str, Any]:
    """The suite's report so far: counts, seconds, workers and the slowest tests (setup and teardown included)."""
    counts = {key: sum(1 for outcome in _outcomes.values() if outcome == key) for key in ("passed", "skipped", "failed")}
    slowest = sorted(_durations.items(), key=lambda item: -item[1])[:SLOWEST]
    seconds, install = round(time.time() - _started, 1), _seconds_from_env("DEEPSENT_INSTALL_SECONDS")
    return {"date": dt.date.today().isoformat(), "commit": _commit(), **counts, "pytest_seconds": seconds,
            "install_seconds": install, "total_seconds": None if install is None else round(install + seconds, 1),
            "workers": workers,
            "slowest": [{"test": nodeid, "seconds": round(seconds, 1)} for nodeid, seconds in slowest]}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the report where ``DEEPSENT_SUITE_REPORT`` says, atomically (the controlling process only)."""
    target = os.environ.get("DEEPSENT_SUITE_REPORT")
    if not target or hasattr(session.config, "workerinput"):
        return
    workers = getattr(session.config.option, "numprocesses", None) or 0
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(report(int(workers)), indent=1) + "\n", encoding="utf-8")
    partial.replace(path)
