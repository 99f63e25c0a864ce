"""Who owns an MLflow run, and ending the runs a killed process left RUNNING.

A process killed by SIGKILL (or an out-of-memory kill) cannot end its MLflow run, which would stay
RUNNING for good. Every run :func:`encoders.model.tracking.run` starts carries its owner (:func:`owner_tags`):
host, process id and the process's start time (so a reused pid is not taken for the owner), and before it
starts, every RUNNING run of the same experiment whose owner on this host is gone is ended KILLED
(:func:`end_left_runs`). ``promote``, holding its promotion lock
(:func:`encoders.model.ranker_registry.promotion_lock`), also ends its stage's runs that have no owner
(written before owners were recorded). Runs of other hosts are left to their host's next run.
"""
from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from pipeline.core.config import Settings

log = logging.getLogger(__name__)

HOST_TAG, PID_TAG, STARTED_TAG = "deepsent.host", "deepsent.pid", "deepsent.pid_started"
#: The stage a run belongs to (``promote``, ...): runs are ended by a later run of their own stage.
STAGE_TAG = "deepsent.stage"
#: Set on a run ended by a later run of its stage: that run's process and host.
ENDED_BY_TAG = "deepsent.ended_by"


def _process(pid: int) -> tuple[str, str]:
    """(state, start time in clock ticks since boot) of process ``pid`` from /proc; ("", "") when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # the name before ")" may hold spaces
    except OSError:
        return "", ""
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def owner_tags() -> dict[str, str]:
    """The tags that name this process as a run's owner."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), STARTED_TAG: _process(os.getpid())[1]}


def owner_alive(tags: dict[str, str]) -> bool:
    """Whether the process a run's owner tags name still runs on this host (False without them; a zombie is gone)."""
    pid = tags.get(PID_TAG, "")
    if not pid.isdigit():
        return False
    if not Path("/proc/self/stat").exists():  # no /proc: the pid alone says
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    state, started = _process(int(pid))
    return state not in ("", "Z", "X") and started == tags.get(STARTED_TAG)


def left_running(run: Any, claim_unowned: bool = False) -> bool:
    """Whether a RUNNING ``run`` was left by a killed process of this host (see the module docstring); a run without
    an owner counts only with ``claim_unowned`` (where no live process of its stage can hold one: promote's lock)."""
    tags = run.data.tags
    if PID_TAG not in tags:
        return claim_unowned
    return tags.get(HOST_TAG) == socket.gethostname() and not owner_alive(tags)


def end_left_runs(settings: Settings, experiment: str, stage: str | None = None) -> list[str]:
    """End KILLED the RUNNING runs of ``experiment`` (of ``stage``, tag ``deepsent.stage``, when given) that killed
    processes of this host left; their ids. With ``stage``, its runs without an owner are ended too (those without
    any tag included): call it so only where no other run of the stage can be running (promote: under its lock)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    me = f"{stage or 'run'} pid {os.getpid()} on {socket.gethostname()}"
    ended = []
    for run in client.search_runs([found.experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000):
        if stage and run.data.tags.get(STAGE_TAG, stage) != stage:
            continue  # another stage's run (a run killed before its first tag counts as this stage's)
        if left_running(run, claim_unowned=stage is not None):
            client.set_tag(run.info.run_id, ENDED_BY_TAG, me)
            client.set_terminated(run.info.run_id, "KILLED")
            log.warning("MLflow run %s (%s) of a process that was killed (pid %s) ended KILLED", run.info.run_id,
                        run.data.tags.get(STAGE_TAG) or run.info.run_name, run.data.tags.get(PID_TAG, "unknown"))
            ended.append(run.info.run_id)
    return ended
