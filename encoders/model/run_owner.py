"""The MLflow runs of promotions: who owns one, and ending those a killed ``promote`` left RUNNING.

A promote killed by SIGKILL (or an out-of-memory kill) cannot end its MLflow run, which would stay
RUNNING for good. Each promotion run carries its owner: host, process id and the process's start time
(so a reused pid is not taken for the owner). The next promote of the registry, holding the promotion
lock (:func:`encoders.model.ranker_registry.promotion_lock`), ends KILLED every RUNNING promotion run of
this host whose owner is gone, and a run without an owner (written before owners were recorded). Runs of
other hosts are left to their host's next promote.
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
#: Set on a run ended by a later promote: that promote's process and host.
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


def left_running(run: Any) -> bool:
    """Whether a RUNNING promotion ``run`` was left by a killed process of this host (see the module docstring)."""
    tags = run.data.tags
    return tags.get(HOST_TAG, socket.gethostname()) == socket.gethostname() and not owner_alive(tags)


def end_left_runs(settings: Settings, experiment: str) -> list[str]:
    """End KILLED the RUNNING runs of ``experiment`` that killed promotes of this host left; their ids. Call it
    holding the promotion lock."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    me = f"promote pid {os.getpid()} on {socket.gethostname()}"
    ended = []
    for run in client.search_runs([found.experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000):
        if left_running(run):
            client.set_tag(run.info.run_id, ENDED_BY_TAG, me)
            client.set_terminated(run.info.run_id, "KILLED")
            log.warning("MLflow run %s of a promote that was killed (pid %s) ended KILLED", run.info.run_id,
                        run.data.tags.get(PID_TAG, "unknown"))
            ended.append(run.info.run_id)
    return ended
