"""The failure notifier of every deepsent task: one message per task that fails for good (retries spent).

It is an Airflow ``BaseNotifier`` set as ``on_failure_callback`` in the DAGs' default args; where the
message goes is read when it fires, from the worker's ``DEEPSENT_NOTIFY`` (``pipeline.runtime.notify``).
Light at import (stdlib + airflow.sdk): DAG parsing builds it.
"""
from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseNotifier

log = logging.getLogger(__name__)


def failure_message(context: Any) -> dict[str, Any]:
    """The notification of a failed task: DAG, run, task, try, logical date, the error's one line, log URL."""
    ti = context.get("ti") or context.get("task_instance")
    error = context.get("exception")
    logical_date = context.get("logical_date")
    return {
        "event": "task_failed",
        "dag_id": getattr(ti, "dag_id", None),
        "run_id": getattr(ti, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "map_index": getattr(ti, "map_index", -1),
        "try_number": getattr(ti, "try_number", None),
        "logical_date": logical_date.isoformat() if logical_date is not None else None,
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "log_url": getattr(ti, "log_url", None),
    }


class FailureNotifier(BaseNotifier):
    """Sends ``failure_message`` to ``DEEPSENT_NOTIFY`` (a JSONL file or a webhook); nothing when unset."""

    def notify(self, context: Any) -> None:
        """Deliver the message; a bad target or an unreachable webhook is logged, never raised."""
        from pipeline.runtime.notify import notify_target, send

        message = failure_message(context)
        try:
            where = send(notify_target(), message)
        except Exception as exc:  # a notification must never hide the task's own failure
            log.error("deepsent: failure notification not sent: %s", exc)
            return
        log.info("deepsent: failure of %s.%s notified to %s", message["dag_id"], message["task_id"], where or "nowhere "
                 "(DEEPSENT_NOTIFY is empty)")
