"""Who owns an MLflow run, and ending the runs a killed process left RUNNING.

A process killed by SIGKILL (or an out-of-memory kill) cannot end its MLflow run, which would stay
RUNNING for good. Every run :func:`encoders.model.tracking.run` starts carries its owner (:func:`owner_tags`):
its process space (the kernel's boot id and the pid namespace, in which a pid means one process: a host name
can change under a running process, a boot id cannot), process id and start time (so a reused pid is not taken
for the owner), and the host name for people. Before a new run starts, :func:`end_left_runs`, the one place that
ends runs left RUNNING, ends KILLED every RUNNING run of the same experiment whose owner in this process space is
gone, and every run of an earlier try of the Airflow task the new run belongs to (Airflow started this try, so
the earlier one's worker is gone, whichever host it ran on). ``promote``, holding its promotion lock
(:func:`encoders.model.ranker_registry.promotion_lock`), also ends its stage's runs that have no owner (written
before owners were recorded). Runs of other process spaces (hosts, containers) are left to their own next run;
a run whose owner recorded only its host name (before process spaces were) is judged by that name.
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
#: The process space of the owner: ``<boot id>/<pid namespace>`` (empty where /proc does not tell).
SPACE_TAG = "deepsent.pid_space"
#: The tags that name one Airflow task instance (every try of it shares them) and the try.
TASK_TAGS = ("airflow.dag_id", "airflow.dag_run_id", "airflow.task_id", "airflow.map_index")
TRY_TAG = "airflow.try_number"
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


def process_space() -> str:
    """Where this process's pid means this process: the kernel's boot id and the pid namespace ("" without /proc)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def owner_tags() -> dict[str, str]:
    """The tags that name this process as a run's owner."""
    return {HOST_TAG: socket.gethostname(), SPACE_TAG: process_space(), PID_TAG: str(os.getpid()),
            STARTED_TAG: _process(os.getpid())[1]}


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
    """Whether a RUNNING ``run`` was left by a killed process of this process space (see the module docstring); a run
    without an owner counts only with ``claim_unowned`` (where no live process of its stage can hold one: promote's
    lock)."""
    tags = run.data.tags
    if PID_TAG not in tags:
        return claim_unowned
    space = process_space()
    mine = tags[SPACE_TAG] == space if tags.get(SPACE_TAG) and space else tags.get(HOST_TAG) == socket.gethostname()
    return mine and not owner_alive(tags)


def superseded(run: Any, task: dict[str, str] | None) -> bool:
    """Whether ``run`` belongs to an earlier try of the Airflow task whose tags ``task`` holds (outside Airflow: no)."""
    if not task or not all(name in task for name in TASK_TAGS):
        return False
    tags = run.data.tags
    return all(tags.get(name) == task[name] for name in TASK_TAGS) and tags.get(TRY_TAG) != task.get(TRY_TAG)


def end_left_runs(settings: Settings, experiment: str, stage: str | None = None,
                  superseding: dict[str, str] | None = None) -> list[str]:
    """End KILLED the RUNNING runs of ``experiment`` (of ``stage``, tag ``deepsent.stage``, when given) that killed
    processes of this process space left, and those of earlier tries of the Airflow task ``superseding`` tags name;
    their ids. With ``stage``, its runs without an owner are ended too (those without any tag included): call it so
    only where no other run of the stage can be running (promote: under its lock)."""
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
        if superseded(run, superseding):
            why = f"try {superseding.get(TRY_TAG, '?')} of the task"  # type: ignore[union-attr]
        elif left_running(run, claim_unowned=stage is not None):
            why = me
        else:
            continue
        client.set_tag(run.info.run_id, ENDED_BY_TAG, why)
        client.set_terminated(run.info.run_id, "KILLED")
        log.warning("MLflow run %s (%s) of a process that was killed (pid %s) ended KILLED", run.info.run_id,
                    run.data.tags.get(STAGE_TAG) or run.info.run_name, run.data.tags.get(PID_TAG, "unknown"))
        ended.append(run.info.run_id)
    return ended
