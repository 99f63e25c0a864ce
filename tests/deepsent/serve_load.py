"""Load on a running ``deepsent serve`` for the swap tests: client threads searching in a loop, and the answers of
one build to every query in every mode, so each answer under load can be checked against its build's."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pipeline.core.config import PROJECT_ROOT

from tests.deepsent.serve_process import Served

QUERIES = ["cordless drill", "led light bulb 60w", "kitchen faucet with sprayer", "toilet seat", "patio furniture",
           "ceiling fan with light", "garden hose", "door knob"]
MODES = ("rrf", "dense", "bm25")
#: Bounds of the clients' loops: requests per client, and seconds.
MAX_REQUESTS, MAX_SECONDS = 5_000, 240.0


def build_answers(served: Served) -> tuple[str, dict[tuple[str, str], list[dict[str, Any]]]]:
    """The build served and its hits of every query in every mode of :data:`MODES`."""
    with served.client() as client:
        found = {(q, mode): client.get("/search", params={"q": q, "mode": mode}).json() for q in QUERIES for mode in MODES}
    (build,) = {answer["build"] for answer in found.values()}
    return build, {key: answer["hits"] for key, answer in found.items()}


def publish_index(index: dict[str, Any], model_uri: str, data_dir: Path) -> None:
    """``deepsent index`` of ``model_uri`` into ``index``'s store as a real subprocess (a new build, switched in by
    ``current.json``), with ``index["env"]`` added to the environment when it has one (an S3 store's endpoint)."""
    env = {**os.environ, **index.get("env", {}), "MLFLOW_TRACKING_URI": index["tracking"], "DEEPSENT_DEVICE": "cpu"}
    proc = subprocess.run([sys.executable, "-m", "deepsent.cli", "index", "--model-uri", model_uri, "--store",
                           str(index["store"]), "--data-dir", str(data_dir)], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait until ``condition()`` holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(0.1)


class Clients:
    """Threads searching in a loop until stopped (or their bound): every answer kept as (status, build, query, mode,
    hits), in each client's order."""

    def __init__(self, served: Served, count: int) -> None:
        self.served, self.stopping = served, threading.Event()
        self.seen: list[list[tuple[int, str, str, str, Any]]] = [[] for _ in range(count)]
        self.threads = [threading.Thread(target=self._loop, args=(n,)) for n in range(count)]

    def __enter__(self) -> "Clients":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)

    def _loop(self, number: int) -> None:
        pick, deadline = random.Random(number), time.monotonic() + MAX_SECONDS
        with self.served.client() as client:
            for _ in range(MAX_REQUESTS):
                if self.stopping.is_set() or time.monotonic() > deadline:
                    return
                query, mode = pick.choice(QUERIES), pick.choice(MODES)
                try:
                    response = client.get("/search", params={"q": query, "mode": mode})
                    body = response.json()
                    self.seen[number].append((response.status_code, body.get("build", ""), query, mode, body.get("hits")))
                except Exception as exc:  # noqa: BLE001 - a failed request is counted, not raised in the thread
                    self.seen[number].append((0, "", query, mode, repr(exc)))
                time.sleep(0.005)  # leave the cores some room for the index build

    def builds(self) -> set[str]:
        """Every build some answer named."""
        return {build for answers in self.seen for _, build, *_ in answers}
