"""``deepsent serve``'s bounds on a real uvicorn subprocess: the token beyond loopback, 503 over the concurrency
limit, 504 past the request timeout, SIGTERM answering the request in flight before it exits 0, and a first load
that fails stopping the server with one line."""
from __future__ import annotations

import secrets
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepsent.cli import main
from deepsent.commands.serve import MIN_TOKEN_CHARS, TOKEN_ENV
from tests.deepsent.serve_process import Served, launch, metric, private_index, start

pytestmark = pytest.mark.services  # real uvicorn servers

#: A search that takes a few tenths of a second on the small index: a full batch of queries, 1,000 titles each, fused.
HEAVY = {"queries": [f"cordless drill kit {i}" for i in range(64)], "k": 1000, "mode": "linear"}


@pytest.fixture()
def index(small_index: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A private copy of the small index."""
    return private_index(small_index, tmp_path)


def _wait_for_in_flight(served: Served, count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with served.client() as client:
        while metric(client.get("/metrics").text, "deepsent_serve_searches_in_flight") != count:
            assert time.monotonic() < deadline, f"never {count} searches in flight"
            time.sleep(0.02)


@pytest.mark.parametrize("host, token, message", [
    ("0.0.0.0", None, f"--host 0.0.0.0 listens beyond loopback: set {TOKEN_ENV} (at least {MIN_TOKEN_CHARS} characters)"),
    ("::", None, f"--host :: listens beyond loopback: set {TOKEN_ENV}"),
    ("127.0.0.1", "short", f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} printable characters"),
])
def test_a_server_beyond_loopback_refuses_to_start_without_a_token(index: dict[str, Any], host: str, token: str | None,
                                                                   message: str, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", index["tracking"])
    if token is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, token)
    code = main(["serve", "--host", host, "--port", "0", "--model-uri", index["model_uri"], "--store",
                 str(index["store"]), "--data-dir", str(index["data_dir"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"deepsent: error: {message}"), err


def test_with_a_token_every_request_must_carry_it_and_it_is_never_logged(index: dict[str, Any]) -> None:
    token = secrets.token_hex(16)
    served = start(index, env={TOKEN_ENV: token}, headers={"authorization": f"Bearer {token}"})
    try:
        with served.client() as client:
            for path in ("/healthz", "/readyz", "/search?q=drill", "/metrics", "/", "/openapi.json"):
                for headers in ({}, {"authorization": "Bearer " + "0" * 32}, {"authorization": token},
                                {"authorization": f"Basic {token}"}):
                    refused = client.get(path, headers=headers)
                    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
                    assert refused.json() == {"error": f"this server requires its token: send Authorization: Bearer "
                                                       f"<{TOKEN_ENV}>"}
            assert client.post("/search", json={"queries": ["drill"]}).status_code == 401
            found = client.get("/search", params={"q": "drill"}, headers={"authorization": f"bearer {token}"})
            text = client.get("/metrics", headers={"authorization": f"Bearer {token}"}).text
        assert found.status_code == 200 and len(found.json()["hits"]) == 10
        assert metric(text, "deepsent_serve_requests_total", route="/search", status="401") == 5
    finally:
        assert served.stop() == 0
    log = served.log_text()
    assert "(token required)" in log and token not in log


def test_over_the_limit_is_503_with_retry_after_and_past_the_timeout_504(index: dict[str, Any]) -> None:
    served = start(index, "--max-in-flight", "1", "--timeout-seconds", "0.1")
    try:
        with served.client() as client:
            slow = client.post("/search", json=HEAVY)  # answered at the timeout; its search goes on, holding the slot
            busy = client.get("/search", params={"q": "drill"})
            page = client.get("/", params={"q": "drill"})
            _wait_for_in_flight(served, 0)
            free = client.get("/search", params={"q": "drill"})
            text = client.get("/metrics").text
    finally:
        assert served.stop() == 0
    assert slow.status_code == 504 and slow.json() == {"error": "the search took longer than 0.1 s"}
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
    assert busy.json() == {"error": "over the limit of 1 searches at once; try again"}
    assert page.status_code == 503 and "over the limit of 1 searches at once" in page.text
    assert free.status_code == 200
    assert metric(text, "deepsent_serve_errors_total", kind="timeout") == 1
    assert metric(text, "deepsent_serve_errors_total", kind="overloaded") == 2


def test_sigterm_answers_the_search_in_flight_then_exits_0(index: dict[str, Any]) -> None:
    served = start(index, "--timeout-seconds", "120")
    answers: list[httpx.Response] = []
    with served.client() as client:
        worker = threading.Thread(target=lambda: answers.append(client.post("/search", json=HEAVY)))
        worker.start()
        _wait_for_in_flight(served, 1)
        served.proc.send_signal(signal.SIGTERM)
        worker.join(120)
    assert served.stop() == 0
    assert [a.status_code for a in answers] == [200] and len(answers[0].json()["results"]) == len(HEAVY["queries"])
    assert "stopped by SIGTERM" in served.log_text()
    with pytest.raises(httpx.ConnectError), httpx.Client(base_url=served.url) as client:
        client.get("/healthz")


def test_a_model_without_an_index_stops_the_server_with_one_line(index: dict[str, Any]) -> None:
    shutil.rmtree(index["store"] / "indexes")
    served = launch(index)
    assert served.proc.wait(120) == 2
    lines = served.log_text().strip().splitlines()
    assert lines[-1].startswith("deepsent: error: no index for lstm version 1 at ") and "run deepsent index" in lines[-1]
    assert "Traceback" not in served.log_text()
