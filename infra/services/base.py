"""What the stack knows about one service: how to start it, check it, stop it, and what to do around it."""
from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from infra.config import StackConfig

BIN_DIR = Path(sys.executable).parent
Command = Callable[[StackConfig], "tuple[list[str], dict[str, str]]"]
Check = Callable[[StackConfig], bool]
Hook = Callable[[StackConfig], None]


@dataclass(frozen=True)
class Service:
    """One long-running process tree of the stack.

    ``stage``: services of a stage start together and must all be healthy before the next stage starts;
    ``ports``: the port settings it binds (checked free before it starts); ``prepare`` runs before the
    start (installs, initialises: idempotent), ``ready`` after it is healthy (even when already running).
    """

    name: str
    label: str
    command: Command
    healthy: Check
    stage: int
    url: Callable[[StackConfig], str]
    ports: tuple[str, ...] = ()
    prepare: Hook | None = None
    ready: Hook | None = None
    stop_signal: int = signal.SIGTERM
    run_as: Callable[[], str | None] = lambda: None


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of ``path`` (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
