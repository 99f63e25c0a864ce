"""The documented ``mlflow models serve`` command (docs/ARCHITECTURE.md, which the README links), run as written
from a checkout, answers on 127.0.0.1 with the champion's vectors (MLflow execs ``uvicorn`` from PATH: the command puts the virtualenv's ``bin`` first)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from encoders.model import ranker_registry as ranker
from pipeline.core.config import PROJECT_ROOT, Settings


def _documented_command() -> str:
    """The ``mlflow models serve`` command of docs/ARCHITECTURE.md (the one that runs: it names a model)."""
    text = (PROJECT_ROOT / "docs" / "ARCHITECTURE.md").read_text()
    (command,) = re.findall(r"`([^`]*mlflow models serve -m[^`]*)`", text)
    return command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_readmes_mlflow_serve_command_answers_with_the_champions_vectors(
        registry: Settings, promotion_registry: dict[str, Any], tmp_path: Path) -> None:
    client = ranker.client(registry)
    champion = ranker.register_challenger(registry, promotion_registry["uris"]["lexical"])
    ranker.set_champion(client, str(champion.version))
    checkout = tmp_path / "checkout"  # a checkout as the README assumes: .venv/ and the store's .deepsent/mlflow.db
    (checkout / ".deepsent").mkdir(parents=True)
    (checkout / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    shutil.copyfile(registry.mlflow_tracking_uri.removeprefix("sqlite:///"), checkout / ".deepsent" / "mlflow.db")
    port = _free_port()
    command = _documented_command().replace("--port 5001", f"--port {port}")
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p)  # as a fresh shell has it
    server = subprocess.Popen(["bash", "-c", command], cwd=checkout, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, answer = time.monotonic() + 120, None
        while answer is None:
            assert server.poll() is None, server.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "no answer in 120 s"
            request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", method="POST",
                                             data=json.dumps({"inputs": ["cordless drill", "60w led bulb"]}).encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    answer = json.loads(response.read())
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    vectors = answer["predictions"]
    assert len(vectors) == 2 and len(vectors[0]) == len(vectors[1]) > 1
