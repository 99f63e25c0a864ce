"""SIGTERM, the way Airflow, Kubernetes and ``deepsent stack down`` stop a process, handled like Ctrl-C.

Python turns SIGINT into ``KeyboardInterrupt``, so ``finally`` blocks run: the trainer keeps its
last checkpoint and ends its MLflow run KILLED. SIGTERM's default action ends the process on the
spot instead. Inside :func:`sigterm_raises`, SIGTERM raises :class:`Terminated`, a
``KeyboardInterrupt``, so both signals take the same path. The CLI then exits with 128 + the
signal number, 130 for SIGINT and 143 for SIGTERM: the Unix convention for "stopped by a signal",
the code a shell, Airflow or Kubernetes already show for a process that SIGTERM killed outright.

A write that must not be cut in half (an MLflow database row, a checkpoint and its progress file)
runs inside :func:`held_back`: a SIGTERM or SIGINT arriving then is raised as soon as the block ends. The
same holds, without a block, while the main thread runs inside a database library (:data:`HELD_INSIDE`:
SQLAlchemy, MLflow's tracking store): the stop is raised once it has returned. Raised in the middle of an
SQLite transaction, it left the session half-closed and the database locked by the process itself (about 1
SIGINT in 12 during MLflow writes), so ending the run KILLED failed with ``database is locked``.
"""
from __future__ import annotations

import _thread
import ctypes
import signal
import threading
import time
from contextlib import contextmanager
from types import FrameType
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM while :func:`sigterm_raises` is active."""


#: Modules inside which a stop waits until the call returns: a database write cut there leaves a lock behind.
HELD_INSIDE = ("sqlalchemy", "mlflow.store")
#: How often a stop held inside :data:`HELD_INSIDE` looks again, and for how long at most it waits.
RECHECK_S, HOLD_LIMIT_S = 0.02, 60.0


class _Hold:
    """How many :func:`held_back` blocks are open, the stop that arrived meanwhile, and since when a stop has waited
    for a database call to return (main thread)."""

    depth = 0
    pending: KeyboardInterrupt | None = None
    waiting_since: float | None = None
    handling = 0  # open sigterm_raises blocks: a stop looked at again after they end would meet other handlers
    raised = 0  # stops raised so far: a re-delivery scheduled before one of them is stale and dropped


@contextmanager
def held_back() -> Iterator[None]:
    """Run the block whole: a SIGTERM or SIGINT arriving inside it is raised when the block ends."""
    _Hold.depth += 1
    try:
        yield
    finally:
        _Hold.depth -= 1
        if _Hold.depth == 0 and _Hold.pending is not None:
            pending, _Hold.pending = _Hold.pending, None
            _Hold.raised += 1
            raise pending


def _inside_held_module(frame: FrameType | None) -> bool:
    """Whether the interrupted code runs inside one of :data:`HELD_INSIDE` (anywhere down its stack)."""
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if any(name == module or name.startswith(module + ".") for module in HELD_INSIDE):
            return True
        frame = frame.f_back
    return False


def _stop(signum: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGINT: the stop is raised now, or once the write in progress has ended."""
    stop = Terminated(f"stopped by {signal.Signals(signum).name}") if signum == signal.SIGTERM else KeyboardInterrupt()
    if _Hold.depth:
        _Hold.pending = _Hold.pending or stop  # raised when the write in progress has finished
        _ignore_later(signum)
        return
    if _inside_held_module(frame):
        _Hold.waiting_since = _Hold.waiting_since or time.monotonic()
        if time.monotonic() - _Hold.waiting_since < HOLD_LIMIT_S:
            timer = threading.Timer(RECHECK_S, _look_again, (signum, _Hold.raised))
            timer.daemon = True
            timer.start()  # the same signal again in a moment: raised once the database call has returned
            return
    _Hold.waiting_since = None
    _ignore_later(signum)
    _Hold.raised += 1
    raise stop


def _look_again(signum: int, raised: int) -> None:
    """The held stop, delivered again to the main thread while our handlers are still set and no stop was raised
    since it was held (``raised``: the count then): a stale one would interrupt the clean-up of the first."""
    if _Hold.handling and _Hold.raised == raised:
        _thread.interrupt_main(signum)


def _ignore_later(signum: int) -> None:
    """After a SIGTERM, later ones are ignored: the clean-up this one starts must finish."""
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While active, the first SIGTERM raises :class:`Terminated` in the main thread and later ones are ignored so
    that the clean-up it starts can finish; SIGINT raises ``KeyboardInterrupt`` as usual. Both wait for an open
    :func:`held_back` block or a database call to end; the previous handlers are restored afterwards. Off the main
    thread (where Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    _Hold.handling += 1
    try:
        yield
    finally:
        _Hold.handling -= 1
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


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
