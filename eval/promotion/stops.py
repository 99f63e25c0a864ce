"""What a SIGINT or SIGTERM does to a promotion (:mod:`eval.promotion.promote`): one rule, whatever the moment or the database.

A signal either stops the promotion before its decision is recorded or is reported after it, and the command exits
128 + the signal (130, 143) either way. The handler only notes the signal
(:func:`pipeline.runtime.interrupt.stops_at_checkpoints`); the promotion raises it at its checkpoints: before the run,
once the run exists, once the challenger is registered, around the gate (an
:func:`~pipeline.runtime.interrupt.interruptible` part, where it is raised at once) and just before the decision is
written. The run then ends KILLED with no decision and the CLI says ``interrupted``; an error raised once a signal
came (a write that gave up on a locked database, say) is raised as that signal. The decision is recorded by the
champion alias (when it moves) and the run's decision tags; a signal from then on does not undo it: the remaining
bookkeeping (params, metrics, the version's tags) is finished, the run ends FINISHED, and ``<interrupted> after the
decision was recorded: <decision> stands`` is logged before the stop is raised (so ``deepsent run`` stops before
indexing). When the process still runs ``STOP_GRACE_S`` after the signal (a database another connection keeps
locked), it exits at once with one line saying what it leaves: a run still RUNNING, which ``promote --status`` lists
as it is and the next promote ends KILLED.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from pipeline.runtime.interrupt import STOP_GRACE_S, described, exit_code, received, stops_at_checkpoints

log = logging.getLogger(__name__)

#: How long the watchdog waits for a decision write in progress to return before taking it as never written.
WRITE_WAIT_S = 1.0


@dataclass
class Progress:
    """How far one promotion got: its MLflow run once started, its decision once recorded (``'refused' for ...``), and
    a lock held while the decision is written, so that the watchdog reads the two between writes."""

    run_id: str = ""
    decided: str = ""
    writing: threading.Lock = field(default_factory=threading.Lock)

    def last_word(self, stop: KeyboardInterrupt) -> tuple[str, int]:
        """The line and exit status of a promotion that did not end within the grace after ``stop`` (watchdog thread).
        A decision write still waiting after :data:`WRITE_WAIT_S` waits for the database: it dies unwritten."""
        self.writing.acquire(timeout=WRITE_WAIT_S)  # kept: the main thread writes nothing more before the exit
        how, late = described(stop), f"within {STOP_GRACE_S:g} s of the signal (the database is locked or busy)"
        if self.decided:
            line = (f"{how} after the decision was recorded: {self.decided} stands; MLflow run {self.run_id} was not "
                    f"ended {late}: it stays RUNNING until the next promote ends it KILLED")
        elif self.run_id:
            line = (f"{how} before the decision; MLflow run {self.run_id} was not ended KILLED {late}: promote --status "
                    f"lists it as interrupted and the next promote ends it KILLED")
        else:
            line = f"{how} before the decision, with no MLflow run started yet (it waited on a lock or the database)"
        return f"deepsent: error: {line}", exit_code(stop)


@contextmanager
def stops_over_errors() -> Iterator[None]:
    """An error raised in the block once the promotion received a stop (a write that gave up waiting for a locked
    database, say) is raised as that stop, the error as its cause: the stop ends the promotion, and its run KILLED."""
    try:
        yield
    except Exception as exc:
        stop = received()
        if stop is None:
            raise
        raise stop from exc


@contextmanager
def stops_before_the_decision(progress: Progress) -> Iterator[Progress]:
    """Run a promotion with SIGINT and SIGTERM raised at its checkpoints only (see the module docstring); one that came
    after the decision is logged as such and raised once the promotion has returned."""
    with stops_at_checkpoints(progress.last_word):
        with stops_over_errors():
            yield progress
        stop = received()
    if stop is not None:
        log.warning("%s after the decision was recorded: %s stands (MLflow run %s FINISHED)", described(stop),
                    progress.decided, progress.run_id)
        raise stop
