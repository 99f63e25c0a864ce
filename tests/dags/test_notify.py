"""Failures notify: a real ``dag.test()`` run whose first task fails writes one message to DEEPSENT_NOTIFY.

The same run shows that an unknown conf key is refused by the first task with one line naming it.
"""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.runtime.notify import notify_target, send


def _states(dag_run: Any) -> dict[str, tuple[str, int]]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: (ti.state, ti.try_number) for ti in dag_run.get_task_instances(session=session)}


def test_an_unknown_conf_key_fails_the_first_task_and_notifies(dagbag: Any, settings: Settings, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    notifications = tmp_path / "notify" / "notifications.jsonl"
    monkeypatch.setenv("DEEPSENT_NOTIFY", f"file:{notifications}")
    monkeypatch.setenv("DEEPSENT_STORE", settings.store)
    run = dagbag.get_dag("deepsent_retrain").test(logical_date=datetime(2026, 4, 6, tzinfo=timezone.utc),
                                                  run_conf={"epoch": 1})

    states = _states(run)
    assert run.state == "failed"
    assert states["check_params"] == ("failed", 1)
    assert states["ingest"][0] == "upstream_failed"  # nothing of the default grid ran
    [message] = [json.loads(line) for line in notifications.read_text().splitlines()]
    assert (message["event"], message["dag_id"], message["task_id"], message["run_id"]) == (
        "task_failed", "deepsent_retrain", "check_params", run.run_id)
    assert message["error"].startswith("AirflowFailException: bad params: unknown param 'epoch' (known: ")
    assert "epochs" in message["error"] and "\n" not in message["error"]


@pytest.fixture()
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real HTTP server on 127.0.0.1 (a free port) that records the JSON bodies POSTed to it."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def test_a_webhook_target_receives_the_message(webhook: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = webhook
    assert send(notify_target(url), {"event": "task_failed", "task_id": "train"}) == url
    assert received == [{"event": "task_failed", "task_id": "train"}]


def test_no_target_sends_nothing_and_a_bad_one_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSENT_NOTIFY", raising=False)
    assert notify_target() == "" and send("", {"event": "x"}) is None
    for bad in ("slack:#ops", "file:"):
        with pytest.raises(ConfigError, match=r"^DEEPSENT_NOTIFY="):
            notify_target(bad)
