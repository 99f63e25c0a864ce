"""``deepsent serve`` as the tests run it: a real subprocess on a free loopback port, over a private copy of an index.

:func:`private_index` copies the ``small_index`` template (store and MLflow database); :func:`start` runs the server
on it (``--port 0``: the port is read from its log line) and waits until ``/readyz`` answers 200; :meth:`Served.stop`
sends SIGTERM and returns the exit code (SIGKILL when it does not stop in time).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pipeline.core.config import PROJECT_ROOT

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
#: How long a server may take to listen and then to load its index (a busy 2-core machine).
START_S, READY_S = 90.0, 120.0


def private_index(small_index: dict[str, Any], root: Path) -> dict[str, Any]:
    """A copy of ``small_index``'s store and MLflow database under ``root``."""
    shutil.copytree(small_index["store"], root / "store")
    shutil.copyfile(small_index["tracking"].removeprefix("sqlite:///"), root / "mlflow.db")
    return {**small_index, "root": root, "store": root / "store", "tracking": f"sqlite:///{root / 'mlflow.db'}"}


@dataclass
class Served:
    """A running ``deepsent serve``: its process, its base URL and its log file."""

    proc: subprocess.Popen
    log: Path
    url: str = ""
    first_ready: list[int] = field(default_factory=list)  # /readyz statuses seen while waiting for 200

    def client(self, **kwargs: Any) -> httpx.Client:
        """An HTTP client of this server."""
        return httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 60.0), **kwargs)

    def log_text(self) -> str:
        """What the server wrote so far (stderr, and its summary on stdout)."""
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send ``sig`` and return the exit code (killed with SIGKILL after ``timeout`` seconds)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"deepsent serve did not stop within {timeout:.0f} s of {signal.Signals(sig).name}; "
                                 f"its log:\n{self.log_text()[-3000:]}") from None


def launch(index: dict[str, Any], *flags: str, env: dict[str, str] | None = None, log: Path | None = None) -> Served:
    """Start ``deepsent serve --port 0`` on ``index`` (no wait)."""
    log = log or index["root"] / f"serve-{time.monotonic_ns()}.log"
    environ = {**os.environ, "MLFLOW_TRACKING_URI": index["tracking"], "DEEPSENT_DEVICE": "cpu", **(env or {})}
    argv = [sys.executable, "-m", "deepsent.cli", "serve", "--port", "0", "--model-uri", index["model_uri"],
            "--store", str(index["store"]), "--data-dir", str(index["data_dir"]), *flags]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, cwd=PROJECT_ROOT, env=environ, stdout=fh, stderr=subprocess.STDOUT)
    return Served(proc, log)


def start(index: dict[str, Any], *flags: str, env: dict[str, str] | None = None, headers: dict[str, str] | None = None
          ) -> Served:
    """Start ``deepsent serve`` on ``index`` and return it once ``/readyz`` answers 200."""
    served = launch(index, *flags, env=env)
    try:
        served.url = f"http://127.0.0.1:{wait_for_port(served)}"
        deadline = time.monotonic() + READY_S
        with served.client(headers=headers or {}) as client:
            while (status := client.get("/readyz").status_code) != 200:
                served.first_ready.append(status)
                assert served.proc.poll() is None, f"deepsent serve exited:\n{served.log_text()[-3000:]}"
                assert time.monotonic() < deadline, f"not ready after {READY_S:.0f} s:\n{served.log_text()[-3000:]}"
                time.sleep(0.05)
    except BaseException:
        served.stop(signal.SIGKILL)
        raise
    return served


def wait_for_port(served: Served) -> int:
    """The port the server logged it listens on."""
    deadline = time.monotonic() + START_S
    while not (found := LISTENING.search(served.log_text())):
        assert served.proc.poll() is None, f"deepsent serve exited {served.proc.returncode}:\n{served.log_text()}"
        assert time.monotonic() < deadline, f"no 'listening on' line after {START_S:.0f} s:\n{served.log_text()}"
        time.sleep(0.05)
    return int(found.group(1))


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of Prometheus ``text`` (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{wanted}}}" if wanted else name):
            return float(value)
    return 0.0
