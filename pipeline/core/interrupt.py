"""SIGTERM, the way Airflow, Kubernetes and ``deepsent stack down`` stop a process, handled like Ctrl-C.

Python turns SIGINT into ``KeyboardInterrupt``, so ``finally`` blocks run: the trainer keeps its
last checkpoint and ends its MLflow run KILLED. SIGTERM's default action ends the process on the
spot instead. Inside :func:`sigterm_raises`, SIGTERM raises :class:`Terminated`, a
``KeyboardInterrupt``, so both signals take the same path. The CLI then exits with 128 + the
signal number, 130 for SIGINT and 143 for SIGTERM: the Unix convention for "stopped by a signal",
the code a shell, Airflow or Kubernetes already show for a process that SIGTERM killed outright.

A write that must not be cut in half (an MLflow database row, a checkpoint and its progress file)
runs inside :func:`held_back`: a SIGTERM arriving then is raised as soon as the block ends. Raised
in the middle of an SQLite transaction, it left the database locked, so ending the run KILLED failed.
"""
from __future__ import annotations

import ctypes
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM while :func:`sigterm_raises` is active."""


class _Hold:
    """How many :func:`held_back` blocks are open, and the SIGTERM that arrived meanwhile (main thread)."""

    depth = 0
    pending: Terminated | None = None


@contextmanager
def held_back() -> Iterator[None]:
    """Run the block whole: a SIGTERM arriving inside it is raised when the block ends."""
    _Hold.depth += 1
    try:
        yield
    finally:
        _Hold.depth -= 1
        if _Hold.depth == 0 and _Hold.pending is not None:
            pending, _Hold.pending = _Hold.pending, None
            raise pending


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While active, the first SIGTERM raises :class:`Terminated` in the main thread and later ones are
    ignored so that the clean-up it starts can finish; the previous handler is restored afterwards.
    Off the main thread (where Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop = Terminated(f"stopped by {signal.Signals(signum).name}")
        if _Hold.depth:
            _Hold.pending = stop  # raised when the write in progress has finished
            return
        raise stop

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def exit_code(exc: KeyboardInterrupt) -> int:
    """The exit status after an interruption: 128 + 15 = 143 for SIGTERM, 128 + 2 = 130 for SIGINT (Ctrl-C)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


class _SignalStack(ctypes.Structure):
    """``stack_t`` of sigaltstack(2)."""

    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


_SS_ONSTACK = 1


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


@contextmanager
def signal_stack_kept() -> Iterator[None]:
    """Run the block and give the calling thread back the alternate signal stack it had before.

    Python runs its signal handlers (SIGTERM here, SIGINT's KeyboardInterrupt, torch's SIGCHLD) on that stack
    when one is set. OpenVINO's CPU plugin sets one of its own while it compiles a model and puts the previous
    one back when that model goes; two models that go in the order they came left the thread on a stack
    already freed, and the next such signal killed the process with SIGSEGV. Linux only; elsewhere a no-op.
    """
    if not hasattr(signal, "SIGRTMIN"):  # not a POSIX system with sigaltstack
        yield
        return
    libc, before = _libc(), _SignalStack()
    libc.sigaltstack(None, ctypes.byref(before))
    try:
        yield
    finally:
        if not before.ss_flags & _SS_ONSTACK:  # a handler running on it now could not have it swapped
            libc.sigaltstack(ctypes.byref(before), None)
