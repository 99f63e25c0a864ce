"""Processes of the local stack: start one in its own session, find everything it started, stop it all.

Each service runs in its own session (``setsid``): every process it forks, in whatever process group,
keeps that session id, so ``/proc`` tells which processes belong to it. Linux only.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


class StackError(RuntimeError):
    """A service could not start or stop; the message says which and why."""


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, session id) of a process, None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields_after_name = raw.rsplit(")", 1)[1].split()
    return fields_after_name[0], int(fields_after_name[2]), int(fields_after_name[3])


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) pids whose session id is ``sid``: everything a service started."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat and stat[2] == sid and stat[0] != "Z":
                members.append(int(entry.name))
    return sorted(members)


def process_groups(pids: list[int]) -> set[int]:
    """The process group ids of ``pids`` (those still alive)."""
    return {stat[1] for stat in map(proc_stat, pids) if stat is not None}


def reap(pid: int) -> None:
    """Collect the exit status of a leader we started ourselves (else it stays a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def http_get(url: str, timeout: float = 3.0) -> tuple[int, bytes]:
    """Status and body of a GET (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError):
        return 0, b""


def read_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file``; a missing, garbled or <= 1 one is removed and gives None."""
    text = pid_file.read_text().strip() if pid_file.exists() else ""
    if text.isdigit() and int(text) > 1:
        return int(text)
    pid_file.unlink(missing_ok=True)
    return None


def start_session(argv: list[str], env: dict[str, str], log_path: Path, pid_file: Path, cwd: Path,
                  user: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (as ``user`` when given), output appended to ``log_path``, pid recorded."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    as_user = {"user": user, "group": user, "extra_groups": []} if user else {}
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=str(cwd), start_new_session=True, **as_user)
        except OSError as exc:
            raise StackError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    pid_file.write_text(f"{proc.pid}\n")
    return proc


def stop_session(sid: int, label: str, grace: float, first_signal: int = signal.SIGTERM) -> int:
    """``first_signal`` to every process group of session ``sid``, SIGKILL after ``grace``; returns pids stopped."""
    members = session_members(sid)
    for sig, wait in ((first_signal, grace), (signal.SIGKILL, 5.0)):
        for pgid in process_groups(session_members(sid)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while session_members(sid) and time.monotonic() < deadline:
            reap(sid)
            time.sleep(0.2)
        if not session_members(sid):
            break
    reap(sid)
    left = session_members(sid)
    if left:
        raise StackError(f"{label}: processes {left} survived SIGKILL")
    return len(members)
