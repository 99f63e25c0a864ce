"""A pytest plugin: the suite's counts, time, CPU time and slowest tests as JSON (``DEEPSENT_SUITE_REPORT=PATH``).

``infra/test.sh`` sets the path (``.deepsent/suite-report.json`` by default) and the install time it
measured; ``python -m docs_render --suite-from PATH`` copies the file to ``docs/results/suite.json``, from which
the README's figures are rendered. Works with and without pytest-xdist: only the controlling process
writes, from the reports its workers send back.

CPU seconds are the process's own and those of the children it waited for (``getrusage``): each test phase's
share travels with its report, and each worker's total comes back when the worker ends. Processes that leave
their parent's family (the local stack's services, started with ``setsid`` by a command that exits) are not
counted. A test whose phases took more than :data:`BUDGET_S` seconds of wall time is listed as over budget:
not a failure (the machine is noisy), so that a slow newcomer is seen the day it lands; each is listed with its
reason: the fixtures whose own setup took over :data:`SLOW_FIXTURE_S` during its setup (a chain built once for the
suite, a stack brought up for a module), and what its ``budget`` marker says (``@pytest.mark.budget("why")``, for a
test that waits on real services itself), or none when nothing says why.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import resource
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

SLOWEST = 10
#: How many test modules the report lists by CPU seconds (where the suite's CPU goes).
COSTLIEST_MODULES = 15
#: Wall seconds (setup, call and teardown together) above which a test is named as over budget.
BUDGET_S = float(os.environ.get("DEEPSENT_TEST_BUDGET_S", "60"))
_durations: dict[str, float] = defaultdict(float)
_cpu: dict[str, float] = defaultdict(float)
_worker_cpu: dict[str, float] = {}
_outcomes: dict[str, str] = {}
_reasons: dict[str, list[str]] = defaultdict(list)
#: Seconds above which a fixture's own setup (its dependencies apart) is named as a reason for its test's time.
SLOW_FIXTURE_S = float(os.environ.get("DEEPSENT_SLOW_FIXTURE_S", "10"))
_slow_fixtures: list[str] = []
_started = time.time()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the clock when the session starts (collection included, as pytest's own summary counts it)."""
    global _started
    _started = time.time()


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the phase's CPU seconds (measured by the phase hooks below) to its report."""
    outcome = yield
    properties = outcome.get_result().user_properties
    spent = getattr(item, "_cpu_spent", {}).get(call.when)
    if spent is not None:
        properties.append(("cpu_seconds", round(spent, 2)))
    if call.when == "setup":
        if slow := getattr(item, "_slow_fixtures", []):
            properties.append(("over_budget_reason", f"its setup ran {', '.join(slow)}"))
        if marker := item.get_closest_marker("budget"):
            properties.append(("over_budget_reason", str(marker.args[0])))


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
    """Note a fixture whose own setup took over :data:`SLOW_FIXTURE_S` (the setup phase around it takes the note)."""
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    if took > SLOW_FIXTURE_S:
        _slow_fixtures.append(f"the {fixturedef.scope} fixture {fixturedef.argname} ({took:.0f} s)")


def _timed_phase(item: pytest.Item, when: str) -> Any:
    before, noted = cpu_seconds(), len(_slow_fixtures)
    yield
    if when == "setup":
        item._slow_fixtures = _slow_fixtures[noted:]  # type: ignore[attr-defined]
    if not hasattr(item, "_cpu_spent"):
        item._cpu_spent = {}  # type: ignore[attr-defined]
    item._cpu_spent[when] = cpu_seconds() - before  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """Measure the setup phase's CPU seconds (fixtures built here are charged to the first test that asks)."""
    yield from _timed_phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Measure the call phase's CPU seconds."""
    yield from _timed_phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Measure the teardown phase's CPU seconds."""
    yield from _timed_phase(item, "teardown")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's seconds to its test; a failure in any phase fails the test, a skip skips it."""
    _durations[report.nodeid] += report.duration
    _cpu[report.nodeid] += dict(report.user_properties).get("cpu_seconds", 0.0)
    _reasons[report.nodeid] += [value for key, value in report.user_properties if key == "over_budget_reason"]
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A worker sends its whole CPU time back; the controlling process writes the report where
    ``DEEPSENT_SUITE_REPORT`` says, atomically."""
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["cpu_seconds"] = cpu_seconds()  # type: ignore[attr-defined]
        return
    target = os.environ.get("DEEPSENT_SUITE_REPORT")
    if not target:
        return
    workers = getattr(session.config.option, "numprocesses", None) or 0
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(report(int(workers)), indent=1) + "\n", encoding="utf-8")
    partial.replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Keep a finished xdist worker's CPU seconds (pytest-xdist's hook; unused without xdist)."""
    output = getattr(node, "workeroutput", {})
    if "cpu_seconds" in output:
        _worker_cpu[node.workerinput["workerid"]] = output["cpu_seconds"]


def report(workers: int) -> dict[str, Any]:
    """The suite's report so far: counts, wall and CPU seconds, workers, the slowest tests (setup and teardown
    included) and the tests over budget."""
    counts = {key: sum(1 for outcome in _outcomes.values() if outcome == key) for key in ("passed", "skipped", "failed")}
    slowest = sorted(_durations.items(), key=lambda item: -item[1])[:SLOWEST]
    over = sorted(((n, s) for n, s in _durations.items() if s > BUDGET_S), key=lambda item: -item[1])
    seconds, install = round(time.time() - _started, 1), _seconds_from_env("DEEPSENT_INSTALL_SECONDS")
    own = resource.getrusage(resource.RUSAGE_SELF)  # with workers: this process's own (its children are the workers)
    cpu = sum(_worker_cpu.values()) + own.ru_utime + own.ru_stime if _worker_cpu else cpu_seconds()
    return {"date": dt.date.today().isoformat(), "commit": _commit(), **counts, "pytest_seconds": seconds,
            "cpu_seconds": round(cpu, 1), "install_seconds": install,
            "total_seconds": None if install is None else round(install + seconds, 1), "workers": workers,
            "budget_seconds": BUDGET_S,
            "slowest": [{"test": nodeid, "seconds": round(seconds, 1), "cpu_seconds": round(_cpu[nodeid], 1)}
                        for nodeid, seconds in slowest],
            "over_budget": [{"test": nodeid, "seconds": round(seconds, 1), "reason": "; ".join(_reasons[nodeid]) or None}
                            for nodeid, seconds in over],
            "costliest_modules": costliest_modules()}


def costliest_modules() -> list[dict[str, Any]]:
    """The test modules that spent the most CPU seconds (their tests' phases summed), with their wall seconds
    and test counts: where the suite's CPU goes."""
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, seconds in _durations.items():
        entry = modules[nodeid.split("::", 1)[0]]
        entry[0] += _cpu[nodeid]
        entry[1] += seconds
        entry[2] += 1
    ranked = sorted(modules.items(), key=lambda item: -item[1][0])[:COSTLIEST_MODULES]
    return [{"module": name, "cpu_seconds": round(cpu, 1), "seconds": round(wall, 1), "tests": int(count)}
            for name, (cpu, wall, count) in ranked]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the tests over budget at the end of the run, beside pytest's own slowest list."""
    over = sorted(((n, s) for n, s in _durations.items() if s > BUDGET_S), key=lambda item: -item[1])
    if over:
        terminalreporter.write_sep("=", f"{len(over)} test(s) over the {BUDGET_S:.0f} s budget (not a failure)")
        for nodeid, seconds in over:
            terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}: {'; '.join(_reasons[nodeid]) or 'no reason given'}")
