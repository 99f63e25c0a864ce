"""Processes of the local stack: start one in its own session, find everything it started, stop it all.

Each service runs in its own session (``setsid``): every process it forks, in whatever process group,
keeps that session id, so ``/proc`` tells which processes belong to it; a child that starts a session of
its own (PostgreSQL's do) is still found as a descendant. Linux only.
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


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name (state, ppid, pgid, sid, ...), None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, session id) of a process, None when gone."""
    fields = _stat_fields(pid)
    return (fields[0], int(fields[2]), int(fields[3])) if fields else None


def _live_processes() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session id) of every live (non-zombie) process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z":
                out[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return out


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) pids whose session id is ``sid``: everything a service started."""
    return sorted(pid for pid, (_, session) in _live_processes().items() if session == sid)


def service_processes(sid: int) -> list[int]:
    """The members of session ``sid`` and all their live descendants, in whatever session."""
    live = _live_processes()
    found = {pid for pid, (_, session) in live.items() if session == sid}
    grew = True
    while grew:
        children = {pid for pid, (ppid, _) in live.items() if ppid in found} - found
        found |= children
        grew = bool(children)
    return sorted(found)


def listening_addresses(pids: list[int]) -> list[str]:
    """``ip:port`` of every TCP socket the processes ``pids`` listen on (sorted; processes gone are skipped)."""
    import psutil

    found = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="inet")
        except psutil.Error:
            continue
        found |= {f"{c.laddr.ip}:{c.laddr.port}" for c in connections if c.status == psutil.CONN_LISTEN}
    return sorted(found)


def _start_time(pid: int) -> str | None:
    """When a live process started (clock ticks since boot): tells a pid from a later process that reuses it."""
    fields = _stat_fields(pid)
    return fields[19] if fields and fields[0] != "Z" else None


def _alive(known: dict[int, str | None]) -> set[int]:
    """The processes of ``known`` (pid -> start time) that are still the same live processes."""
    return {pid for pid, started in known.items() if started is not None and _start_time(pid) == started}


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
    """``first_signal`` to every process group of session ``sid``, then SIGKILL after ``grace`` to every group
    of the session and of its descendants (known at the start too, so an orphan is not missed); returns pids stopped."""
    known = {pid: _start_time(pid) for pid in service_processes(sid)}

    def left() -> set[int]:
        return _alive(known) | set(service_processes(sid))

    for sig, wait in ((first_signal, grace), (signal.SIGKILL, 5.0)):
        targets = session_members(sid) if sig == first_signal else sorted(left())
        for pgid in process_groups(targets):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while left() and time.monotonic() < deadline:
            reap(sid)
            time.sleep(0.2)
        if not left():
            break
    reap(sid)
    if left():
        raise StackError(f"{label}: processes {sorted(left())} survived SIGKILL")
    return len(known)
