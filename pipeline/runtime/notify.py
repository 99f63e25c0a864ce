"""Where failure notifications go (``DEEPSENT_NOTIFY``) and how one is delivered; stdlib only.

``DEEPSENT_NOTIFY`` is empty (no notification, the failure is only logged), ``file:/path/to/notifications.jsonl``
(one JSON object appended per notification: readable by people, tests and log shippers) or an
``http(s)://`` URL (the JSON object POSTed as the request body, e.g. to a chat webhook).
"""
from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any, Mapping

from pipeline.core.errors import ConfigError

NOTIFY_ENV = "DEEPSENT_NOTIFY"
WEBHOOK_TIMEOUT_S = 10


def notify_target(value: str | None = None) -> str:
    """The notification target (``DEEPSENT_NOTIFY`` when ``value`` is None), checked; empty = none."""
    target = (os.environ.get(NOTIFY_ENV, "") if value is None else value).strip()
    if target and not target.startswith(("file:", "http://", "https://")):
        raise ConfigError(f"{NOTIFY_ENV}={target!r}: expected file:/path/to/file.jsonl or an http(s):// URL")
    if target.startswith("file:") and not target[len("file:"):]:
        raise ConfigError(f"{NOTIFY_ENV}={target!r}: file: needs a path, e.g. file:/var/log/deepsent/notify.jsonl")
    return target


def send(target: str, message: Mapping[str, Any]) -> str | None:
    """Deliver ``message`` as JSON to ``target`` (see the module doc); returns where it went, None when nowhere."""
    if not target:
        return None
    body = json.dumps(message, sort_keys=True, default=str)
    if target.startswith("file:"):
        path = Path(target[len("file:"):].removeprefix("//"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:  # one write of one line: concurrent writers do not interleave
            fh.write(body + "\n")
        return str(path)
    request = urllib.request.Request(target, data=body.encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as response:
        response.read()
    return target
