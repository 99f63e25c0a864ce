"""SIGINT and SIGTERM of ``deepsent promote`` at named moments, one rule: before its decision is recorded a signal
stops the promotion (run KILLED, exit 128 + the signal, one line, no traceback); after it, the decision stands, the
promotion finishes its bookkeeping and says so, and still exits 128 + the signal; a database another connection keeps
locked delays the exit by seconds, not by the lock.

Each promote is the real CLI in a subprocess whose ranker-registry function ``NAME`` is wrapped (:data:`HOOKED`) to send
the signal just before or after it runs: the moment is exact, where watching the database is not. The registry is
fresh (no champion yet); the decision left standing is a rollback's (``--version 1``), which has no gate to wait for.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from encoders.model import ranker_registry as ranker
from eval.promotion.promote import EXPERIMENT
from eval.promotion.status import champion_status
from eval.promotion.stops import stops_over_errors
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.runtime.interrupt import (STOP_GRACE_S, checkpoint, held_back, interruptible, sigterm_raises,
                                     stops_at_checkpoints)
from tests.encoders.test_run_endings import _lock, _release
from tests.gate_sets import train_gate_set

#: ``python -c HOOKED NAME WHEN HOW ARGV...``: ``deepsent ARGV`` with ``ranker.NAME`` sending a signal ``WHEN`` (before,
#: after) it runs; ``HOW``: a signal's name, ``weakref:<name>`` (its handler runs inside a weakref callback, where an
#: exception raised is dropped), or ``pause`` (print "paused", wait for a line on stdin: the test signals).
HOOKED = """
import os, signal, sys, weakref
from deepsent.cli import main
from encoders.model import ranker_registry as ranker

name, when, how = sys.argv[1:4]


class Box:
    pass


def in_a_weakref_callback(signum):
    def callback(_):
        os.kill(os.getpid(), signum)
        for _ in range(10000):  # the handler runs at a bytecode boundary: inside this callback
            pass
    box = Box()
    ref = weakref.ref(box, callback)
    del box


def send():
    if how == "pause":
        print("paused", flush=True)
        sys.stdin.readline()
    elif how.startswith("weakref:"):
        in_a_weakref_callback(getattr(signal, how.split(":")[1]))
    else:
        os.kill(os.getpid(), getattr(signal, how))


original = getattr(ranker, name)


def hooked(*args, **kwargs):
    if when == "before":
        send()
    out = original(*args, **kwargs)
    if when == "after":
        send()
    return out


setattr(ranker, name, hooked)
sys.exit(main(sys.argv[4:]))
"""


def _promote(settings: Settings, flags: list[str], name: str, when: str, how: str) -> subprocess.Popen:
    """``deepsent promote FLAGS``, signalled at ``ranker.<name>`` (see :data:`HOOKED`)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_TRACKING_URI": settings.mlflow_tracking_uri,
           "DEEPSENT_DATA_DIR": str(settings.data_dir)}
    argv = ["promote", *flags, "--store", settings.store]
    return subprocess.Popen([sys.executable, "-c", HOOKED, name, when, how, *argv], cwd=PROJECT_ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _said(err: str) -> list[str]:
    """The CLI's own lines on stderr (``deepsent: ...``), after checking that no traceback was printed."""
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("deepsent:")]


def _promotion_run(settings: Settings) -> Any:
    """The one run of the promotion experiment."""
    from mlflow import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    return run


def _champion(settings: Settings) -> str | None:
    found = ranker.alias_version(ranker.client(settings), ranker.CHAMPION)
    return None if found is None else str(found.version)


@pytest.fixture()
def lexical(registry: Settings, promotion_registry: dict[str, Any], tmp_path: Path) -> list[str]:
    """The flags that gate the lexical model on a judged gate set of training queries (never the reported dev set)."""
    return ["--model-uri", promotion_registry["uris"]["lexical"], "--gate-judgments",
            str(train_gate_set(registry, tmp_path / "gate.csv"))]


def test_a_sigterm_before_the_challenger_is_registered_ends_the_promotion_killed(
        registry: Settings, lexical: list[str]) -> None:
    proc = _promote(registry, lexical, "register_challenger", "before", "SIGTERM")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err[-3000:]
    assert _said(err) == ["deepsent: error: terminated (SIGTERM)"]
    run = _promotion_run(registry)
    assert run.info.status == "KILLED" and "deepsent.decision" not in run.data.tags
    assert _champion(registry) is None


def test_a_sigint_inside_a_weakref_callback_once_the_challenger_is_registered_is_not_swallowed(
        registry: Settings, lexical: list[str]) -> None:
    proc = _promote(registry, lexical, "register_challenger", "after", "weakref:SIGINT")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]  # the promotion went on and exited 0 when the handler raised there
    assert _said(err) == ["deepsent: error: interrupted"]
    run = _promotion_run(registry)
    assert run.info.status == "KILLED" and "deepsent.decision" not in run.data.tags
    assert run.data.tags["deepsent.version"] == "1" and _champion(registry) is None


def test_a_sigint_during_the_gate_stops_it_at_once(registry: Settings, lexical: list[str]) -> None:
    proc = _promote(registry, lexical, "version_uri", "after", "SIGINT")  # the gate's first step: it writes nothing
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]
    assert _said(err) == ["deepsent: error: interrupted"]
    assert "eval.compare" not in err  # no model was scored: the stop did not wait for the gate's end
    assert _promotion_run(registry).info.status == "KILLED" and _champion(registry) is None


def test_a_sigint_after_the_decision_is_recorded_leaves_it_standing_and_says_so(
        registry: Settings, promotion_registry: dict[str, Any]) -> None:
    assert str(ranker.register_challenger(registry, promotion_registry["uris"]["lexical"]).version) == "1"
    proc = _promote(registry, ["--version", "1"], "tag_version", "before", "SIGINT")  # the bookkeeping after it
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err[-3000:]
    assert _said(err) == ["deepsent: error: interrupted"]
    run = _promotion_run(registry)
    assert (f"interrupted after the decision was recorded: 'rolled back' for deepsent-ranker version 1 stands "
            f"(MLflow run {run.info.run_id} FINISHED)") in err
    assert run.info.status == "FINISHED" and run.data.tags["deepsent.decision"] == "rolled back"
    assert _champion(registry) == "1"
    version = ranker.get_version(ranker.client(registry), "1")
    assert version.tags["deepsent.promotion_run"] == run.info.run_id  # the bookkeeping was finished


def test_a_sigint_while_another_connection_locks_the_database_exits_within_seconds(
        registry: Settings, lexical: list[str]) -> None:
    from encoders.model.run_owner import end_left_runs

    proc = _promote(registry, lexical, "register_challenger", "after", "pause")
    holder = None
    try:
        assert proc.stdout.readline().strip() == "paused", proc.stderr.read() if proc.poll() is not None else ""
        holder = _lock(Path(registry.mlflow_tracking_uri.removeprefix("sqlite:///")))  # until the test releases it
        proc.stdin.write("\n")
        proc.stdin.flush()
        time.sleep(0.5)  # the promote's next write waits for the lock
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=STOP_GRACE_S + 15)
        took = time.monotonic() - sent
    finally:
        if holder is not None:
            _release(holder)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    print(f"exit {took:.1f} s after the SIGINT, the database locked")
    assert proc.returncode == 130, err[-3000:]
    assert took < STOP_GRACE_S + 5, took
    run = _promotion_run(registry)
    assert _said(err) == [f"deepsent: error: interrupted before the decision; MLflow run {run.info.run_id} was not "
                          f"ended KILLED within {STOP_GRACE_S:g} s of the signal (the database is locked or busy): "
                          f"promote --status lists it as interrupted and the next promote ends it KILLED"]
    assert run.info.status == "RUNNING" and "deepsent.decision" not in run.data.tags
    (shown,) = champion_status(registry).decisions
    assert shown["decision"] == "interrupted" and shown["mlflow_run_id"] == run.info.run_id
    assert end_left_runs(registry, EXPERIMENT, "promote") == [run.info.run_id]  # what the next promote does first
    assert _promotion_run(registry).info.status == "KILLED" and _champion(registry) is None


def test_a_stop_dropped_inside_a_weakref_callback_is_raised_at_the_next_checkpoint(
        capsys: pytest.CaptureFixture[str]) -> None:
    reached = []

    class Box:
        pass

    def callback(_: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000):  # the handler raises here, inside the callback: Python drops it
            pass

    with pytest.raises(KeyboardInterrupt):
        with sigterm_raises(), stops_at_checkpoints(lambda stop: ("never said", 1)):
            with interruptible():
                box = Box()
                ref = weakref.ref(box, callback)
                del box
                reached.append("after the callback")
            reached.append("after the interruptible part")
            checkpoint()
    assert reached == ["after the callback"] and ref() is None
    assert "KeyboardInterrupt" not in capsys.readouterr().err  # dropped quietly: it is raised at the checkpoint


def test_a_sigterm_in_a_write_of_an_interruptible_part_is_raised_once_the_write_ends() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt) as raised:
        with sigterm_raises(), stops_at_checkpoints(lambda stop: ("never said", 1)), interruptible():
            with held_back():  # a write that must stay whole
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10000):
                    pass
                steps.append("written")
            started = time.monotonic()
            time.sleep(2)  # the stop is sent again in a moment and raised here, not at the part's end
            steps.append("not reached")
    assert steps == ["written"] and raised.type.__name__ == "Terminated"
    assert time.monotonic() - started < 1


def test_an_error_once_a_stop_came_ends_the_run_killed_as_that_stop(registry: Settings) -> None:
    from encoders.model import tracking

    with pytest.raises(KeyboardInterrupt) as raised:
        with sigterm_raises(), stops_at_checkpoints(lambda stop: ("never said", 1)):
            with tracking.run(registry, EXPERIMENT) as active, stops_over_errors():
                os.kill(os.getpid(), signal.SIGINT)  # noted, not raised
                for _ in range(10000):
                    pass
                raise RuntimeError("database is locked")  # a write that waited for the lock and gave up
    assert isinstance(raised.value.__cause__, RuntimeError)
    from mlflow import MlflowClient

    assert MlflowClient(registry.mlflow_tracking_uri).get_run(active.info.run_id).info.status == "KILLED"  # not FAILED


def test_outside_sigterm_raises_checkpoints_change_nothing() -> None:
    before = signal.getsignal(signal.SIGINT)
    with stops_at_checkpoints(lambda stop: ("never said", 1)):
        assert signal.getsignal(signal.SIGINT) is before
        checkpoint()
