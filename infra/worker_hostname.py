"""The name a Celery worker of the stack records as its task instances' ``hostname`` (Airflow's
``[core] hostname_callable``): both workers run on one machine, so the machine's name would not say
which of them ran a task."""
from __future__ import annotations

import os
import socket


def worker_hostname() -> str:
    """``DEEPSENT_WORKER_NAME`` (the Celery node name, e.g. ``gpu@host``), else the machine's FQDN."""
    return os.environ.get("DEEPSENT_WORKER_NAME") or socket.getfqdn()
