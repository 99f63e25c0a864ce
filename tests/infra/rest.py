"""Helpers of the stack tests: free ports, JSON over HTTP, polling."""
from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

#: Seconds a stack test's DAG run may take: a budget, not a bound (it shares 2 cores with the suite's other
#: workers, and every artifact goes through the MLflow server's login).
STACK_RUN_BUDGET_S = 1500


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(url: str, token: str | None = None, method: str = "GET", body: Any = None,
            basic: tuple[str, str] | None = None) -> tuple[int, Any]:
    """Status and decoded JSON body of one HTTP request (with a bearer token or basic-auth user and password)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(basic).encode()).decode()
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers, method=method), timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body or b"null")
        except json.JSONDecodeError:  # an error page that is not JSON (MLflow's 401): its text
            return exc.code, body.decode("utf-8", "replace")


def poll(what: str, check: Any, timeout: float, every: float = 3.0) -> Any:
    """The first truthy value of ``check()``, tried every ``every`` seconds; AssertionError after ``timeout``.

    A request that times out or finds no server (a busy machine, a restarting process) is asked again."""
    deadline, last_error = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError as exc:
            value, last_error = None, exc
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


def trigger_and_wait(airflow_api: str, token: str, dag_id: str, conf: dict[str, Any], timeout: float) -> tuple[str, str]:
    """Unpause ``dag_id``, trigger it with ``conf`` through the REST API, wait for the end: (run URL, state)."""
    import urllib.parse

    dag = f"{airflow_api}/dags/{dag_id}"
    poll("the DAG to be parsed", lambda: request(dag, token)[0] == 200, timeout=180)
    assert request(dag, token, "PATCH", {"is_paused": False})[0] == 200
    code, created = request(f"{dag}/dagRuns", token, "POST", {"logical_date": None, "conf": conf})
    assert code == 200, created
    run_url = f"{dag}/dagRuns/{urllib.parse.quote(created['dag_run_id'], safe='')}"

    def finished() -> str | None:
        state = request(run_url, token)[1]["state"]
        return state if state in ("success", "failed") else None

    return run_url, poll("the run to finish", finished, timeout=timeout, every=5.0)


def listeners_beyond_loopback(pids: list[int]) -> list[str]:
    """Listening addresses of the processes ``pids`` beyond 127.0.0.1 and ::1."""
    from infra.processes import listening_addresses

    return [a for a in listening_addresses(pids) if a.rsplit(":", 1)[0] not in ("127.0.0.1", "::1")]
