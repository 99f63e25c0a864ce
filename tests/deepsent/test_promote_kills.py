"""``kill -9`` of ``deepsent promote`` at several moments: the next promote ends the runs it left KILLED, and
``promote --status`` shows them and counts distinct challengers, not retries.

The promotes run as subprocesses of the real CLI on a small registry (tests/conftest.py ``registry``); the
test watches the MLflow SQLite database read-only and kills the process the moment it reaches each state.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from deepsent.cli import main
from eval.promotion.promote import EXPERIMENT
from pipeline.core.config import Settings
from tests.gate_sets import train_gate_set

ROOT = Path(__file__).resolve().parents[2]
#: SQL over the promotion runs still RUNNING: the moments a promote is killed at, in the order it reaches them.
RUNNING = ("SELECT COUNT(*) FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id "
           "WHERE e.name = ? AND r.status = 'RUNNING'")
MOMENTS: dict[str, str] = {
    "run started": RUNNING,
    "challenger registered": RUNNING + " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid "
                                       "AND t.key = 'deepsent.version')",
    "decision recorded": RUNNING + " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid "
                                   "AND t.key = 'deepsent.decision')",
}


def _reached(db: Path, sql: str) -> bool:
    """Whether the database shows the state ``sql`` counts (a busy database reads as not yet)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05) as conn:
            return bool(conn.execute(sql, (EXPERIMENT,)).fetchone()[0])
    except sqlite3.OperationalError:
        return False


def _promote_killed_when(settings: Settings, argv: list[str], reached: Callable[[], bool]) -> bool:
    """Start ``deepsent promote ARGV``; SIGKILL it once ``reached()``; True when killed, False when it ended first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
           "DEEPSENT_DATA_DIR": str(settings.data_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "deepsent.cli", "promote", *argv, "--store", settings.store],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while proc.poll() is None and not reached():
        assert time.monotonic() < deadline, "the promote reached no state to kill it at in 240 s"
        time.sleep(0.002)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert killed or proc.returncode == 0, proc.stderr
    return killed


def _runs(settings: Settings) -> list[Any]:
    from mlflow import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    return client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                              order_by=["attributes.start_time ASC"])


def _status(settings: Settings, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["--json", "promote", "--status", "--store", settings.store]) == 0
    return json.loads(capsys.readouterr().out)


def test_runs_left_by_killed_promotes_end_killed_and_status_counts_challengers(
        registry: Settings, promotion_registry: dict[str, Any], capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    uris = promotion_registry["uris"]
    gate = ["--gate-judgments", str(train_gate_set(registry, tmp_path / "gate.csv"))]
    assert main(["promote", "--model-uri", uris["lexical"], *gate, "--store", registry.store]) == 0  # the champion
    db = Path(registry.mlflow_tracking_uri.removeprefix("sqlite:///"))
    killed = {}
    for moment, sql in MOMENTS.items():  # the reversed model: a challenger the gate refuses
        for _ in range(3):  # the last moment lasts a few writes: a promote may end before it is seen
            if _promote_killed_when(registry, ["--model-uri", uris["reversed"], *gate], lambda: _reached(db, sql)):
                killed[moment] = [r.info.run_id for r in _runs(registry) if r.info.status == "RUNNING"][-1]
                break
    assert list(killed) == list(MOMENTS), f"killed at {list(killed)} only"
    runs = {r.info.run_id: r for r in _runs(registry)}
    for moment in ("run started", "challenger registered"):  # ended by the next promote, the next kill's
        assert runs[killed[moment]].info.status == "KILLED", moment
        assert runs[killed[moment]].data.tags["deepsent.ended_by"].startswith("promote pid"), moment
    assert runs[killed["decision recorded"]].info.status == "RUNNING"
    before = _status(registry, capsys)  # read-only: it shows the runs left and ends none
    shown = {d["mlflow_run_id"]: d for d in before["decisions"]}
    for moment in ("run started", "challenger registered"):
        assert shown[killed[moment]]["decision"] == "interrupted", moment
        assert shown[killed[moment]]["reason"] == "stopped before deciding (run KILLED)", moment
    assert shown[killed["challenger registered"]]["version"] == "2"
    assert shown[killed["decision recorded"]]["decision"] == "refused"
    assert shown[killed["decision recorded"]]["status"] == "RUNNING"
    assert before["refusals_in_a_row"] == 1 and before["champion"] == "1"

    assert main(["promote", "--model-uri", uris["reversed"], *gate, "--store", registry.store]) == 0  # the retry
    assert f"MLflow run {killed['decision recorded']} (promote) of a process that was killed" in caplog.text
    runs = {r.info.run_id: r for r in _runs(registry)}
    assert [r.info.status for r in runs.values()].count("RUNNING") == 0
    assert runs[killed["decision recorded"]].info.status == "KILLED"
    after = _status(registry, capsys)
    refused = [d for d in after["decisions"] if d["decision"] == "refused"]
    assert len(refused) >= 2 and {d["version"] for d in refused} == {"2"}  # refusals of one challenger ...
    assert after["refusals_in_a_row"] == 1 and after["champion"] == "1"  # ... count once
    assert "(run KILLED)" in json.dumps(after)
