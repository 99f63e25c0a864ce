"""The suite's own plugins: grouped tests share one xdist worker, and a value built once per suite is shared."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.once import once_per_suite

GROUPED = '''
import os, pytest

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return os.getpid()

@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("n", range(4))
def test_grouped(built, n):
    assert built == os.getpid()
    with open(os.environ["PIDS"], "a") as fh:
        fh.write(f"{os.getpid()}\\n")

@pytest.mark.parametrize("n", range(4))
def test_alone(n):
    pass
'''


def test_a_group_runs_on_one_worker_and_its_module_fixture_is_built_once(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    pids = tmp_path / "pids"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.xdist_groups", "-q",
                           "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", "-o", "addopts=",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_grouped.py")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, "PIDS": str(pids)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout
    assert len(pids.read_text().split()) == 4 and len(set(pids.read_text().split())) == 1  # one worker for the group


def test_a_value_is_built_once_and_read_back(tmp_path_factory) -> None:  # noqa: ANN001
    calls: list[Path] = []

    def build(root: Path) -> str:
        calls.append(root)
        (root / "made").write_text("yes")
        return str(root / "made")

    first = once_per_suite(tmp_path_factory, "plugin-test", build)
    again = once_per_suite(tmp_path_factory, "plugin-test", build)
    assert first == again and Path(first).read_text() == "yes" and len(calls) == 1


REASONS = '''
import time, pytest

@pytest.fixture(scope="session")
def shared():
    time.sleep(0.3)
    return "built"

def test_builds_the_shared_value(shared):
    assert shared == "built"

@pytest.mark.budget("waits on a real service")
def test_waits():
    time.sleep(0.3)

def test_slow_for_no_stated_reason():
    time.sleep(0.3)

def test_quick():
    pass
'''


def test_the_report_names_each_test_over_budget_with_its_reason(tmp_path: Path) -> None:
    """A test whose setup ran a slow fixture, or that carries a ``budget`` marker, is over budget with that reason;
    one slow for nothing said has none; a quick one is not listed."""
    import json

    (tmp_path / "test_reasons.py").write_text(REASONS)
    report = tmp_path / "report.json"
    # a pytest of its own: not an xdist worker (whose shared folder is the parent's), on a base folder of its own
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.suite_report", "-q",
                           "-o", "addopts=", "-o", "markers=budget(reason): test", "--rootdir", str(tmp_path),
                           "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_reasons.py")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
                          env={**env, "DEEPSENT_TEST_BUDGET_S": "0.2", "DEEPSENT_SLOW_FIXTURE_S": "0.2",
                               "DEEPSENT_SUITE_REPORT": str(report)})
    assert done.returncode == 0, done.stdout + done.stderr
    reasons = {t["test"].split("::")[1]: t["reason"] for t in json.loads(report.read_text())["over_budget"]}
    assert reasons.pop("test_builds_the_shared_value").startswith("its setup ran the session fixture shared (")
    assert reasons == {"test_waits": "waits on a real service", "test_slow_for_no_stated_reason": None}
    assert "test_slow_for_no_stated_reason: no reason given" in done.stdout
