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

Work that decides or not at all (a promotion) runs in :func:`stops_at_checkpoints`: a signal is noted and raised at the
next :func:`checkpoint` (at once in an :func:`interruptible` part), never in a weakref callback, where Python drops it;
``STOP_GRACE_S`` after it a watchdog ends the process, whatever it waits for, saying what the work leaves behind.
"""
from __future__ import annotations

import _thread
import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, Callable, Iterator


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


def _stop_of(signum: int) -> KeyboardInterrupt:
    """The exception of a stop by ``signum``: :class:`Terminated` for SIGTERM, ``KeyboardInterrupt`` for SIGINT."""
    return Terminated(f"stopped by {signal.Signals(signum).name}") if signum == signal.SIGTERM else KeyboardInterrupt()


def described(stop: KeyboardInterrupt) -> str:
    """How the CLI names a stop: ``terminated (SIGTERM)`` or ``interrupted``."""
    return "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"


def _stop(signum: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGINT: the stop is raised now, or once the write in progress has ended."""
    stop = _stop_of(signum)
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
    previous = _handle_stops(_stop)
    _Hold.handling += 1
    try:
        yield
    finally:
        _Hold.handling -= 1
        _restore(previous)


def _handle_stops(handler: Callable[[int, FrameType | None], None]) -> dict[int, Any]:
    """Make ``handler`` the handler of SIGTERM and SIGINT; the previous handlers."""
    return {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)}


def _restore(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`_handle_stops` returned (the default for one Python did not set)."""
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def exit_code(exc: KeyboardInterrupt) -> int:
    """The exit status after an interruption: 128 + 15 = 143 for SIGTERM, 128 + 2 = 130 for SIGINT (Ctrl-C)."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


#: Seconds a :func:`stops_at_checkpoints` block has, from the first SIGINT or SIGTERM, before its watchdog ends the process.
STOP_GRACE_S = 5.0
#: What the watchdog says and exits with when the grace is over: ``(line, exit status)`` for the stop received.
LastWord = Callable[[KeyboardInterrupt], tuple[str, int]]


class _Checkpoints:
    """The open :func:`stops_at_checkpoints` block: open, in an :func:`interruptible` part, a stop raised, the stop."""

    open = raising = raised = False
    stop: KeyboardInterrupt | None = None
    hook: Callable[[Any], Any] = sys.__unraisablehook__


def _note(signum: int, frame: FrameType | None) -> None:
    """The handler of SIGTERM and SIGINT inside :func:`stops_at_checkpoints`: the first stop is kept for the next
    :func:`checkpoint`; inside :func:`interruptible` it is raised now too, unless the code is inside a
    :func:`held_back` block or a database call (then it is sent again in a moment)."""
    _Checkpoints.stop = _Checkpoints.stop or _stop_of(signum)
    _ignore_later(signum)
    if not _Checkpoints.raising or _Checkpoints.raised:
        return
    if _Hold.depth or _inside_held_module(frame):  # sent again as a SIGINT (a SIGTERM after one is ignored)
        timer = threading.Timer(RECHECK_S, lambda: _Checkpoints.raising and not _Checkpoints.raised
                                and signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT))
        timer.daemon = True
        timer.start()
        return
    _Checkpoints.raised = True
    raise _Checkpoints.stop


def checkpoint() -> None:
    """A point where stopping is safe: raise the SIGINT or SIGTERM the open :func:`stops_at_checkpoints` block received."""
    if _Checkpoints.open and _Checkpoints.stop is not None:
        _Checkpoints.raised = True
        raise _Checkpoints.stop


def received() -> KeyboardInterrupt | None:
    """The stop the open :func:`stops_at_checkpoints` block received, raised or not (None: none yet, or no block)."""
    return _Checkpoints.stop if _Checkpoints.open else None


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside :func:`stops_at_checkpoints`, a part that writes nothing (a computation): a stop is raised there at once;
    a checkpoint comes before and after it (the one after raises a stop Python dropped in a weakref callback)."""
    checkpoint()
    before, _Checkpoints.raising = _Checkpoints.raising, _Checkpoints.open
    try:
        yield
    finally:
        _Checkpoints.raising = before
    checkpoint()


@contextmanager
def stops_at_checkpoints(last_word: LastWord, grace_s: float = STOP_GRACE_S) -> Iterator[None]:
    """Run the block with SIGTERM and SIGINT noted, not raised: :func:`checkpoint` raises the first one where stopping
    is safe, :func:`received` tells one that came after the last checkpoint. When the process still runs ``grace_s``
    after the first signal (waiting on a database another connection locks, say), a watchdog writes
    ``last_word(stop)``'s line on stderr and ends the process with its status. Only on the main thread where
    :func:`sigterm_raises` is active (the CLI, the DAG's tasks); elsewhere, or nested, the block changes nothing."""
    if not _Hold.handling or _Checkpoints.open or threading.current_thread() is not threading.main_thread():
        yield
        return
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    ended = threading.Event()
    _Checkpoints.open, _Checkpoints.stop, _Checkpoints.raising, _Checkpoints.raised = True, None, False, False
    previous = _handle_stops(_note)
    previous_fd = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)  # written to even while C code blocks
    _Checkpoints.hook, sys.unraisablehook = sys.unraisablehook, _drop_noted_stop  # the hook replaced, put back after
    watchdog = threading.Thread(target=_watch, args=(wake_read, previous_fd, ended, last_word, grace_s), daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        ended.set()
        os.write(wake_write, b"\0")  # wakes the watchdog (0 is no signal)
        watchdog.join()
        signal.set_wakeup_fd(previous_fd)
        _restore(previous)
        if isinstance(_Checkpoints.stop, Terminated):
            _ignore_later(signal.SIGTERM)  # as after a SIGTERM sigterm_raises handled: the clean-up must finish
        sys.unraisablehook = _Checkpoints.hook
        _Checkpoints.open = _Checkpoints.raising = False
        os.close(wake_read)
        os.close(wake_write)


def _drop_noted_stop(unraisable: Any) -> None:
    """The unraisable hook inside :func:`stops_at_checkpoints`: a stop Python could not raise (in a weakref callback, a
    ``__del__``) is dropped without a traceback, the next checkpoint raises it; the rest goes to the previous hook."""
    if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _Checkpoints.stop is not None):
        _Checkpoints.hook(unraisable)


def _watch(wake_read: int, forward_fd: int, ended: threading.Event, last_word: LastWord, grace_s: float) -> None:
    """The watchdog of :func:`stops_at_checkpoints`: reads the signal numbers of the wakeup fd (passed on to the one it
    replaced); ``grace_s`` after the first stop, unless the block has ended, says ``last_word`` and ends the process."""
    first, deadline = 0, float("inf")
    while not ended.is_set():
        if not select.select([wake_read], [], [], max(deadline - time.monotonic(), 0.0) if first else None)[0]:
            break
        data = os.read(wake_read, 512)
        if forward_fd >= 0:
            with suppress(OSError):
                os.write(forward_fd, data)
        first = first or next((n for n in data if n in (signal.SIGINT, signal.SIGTERM)), 0)
        deadline = min(deadline, time.monotonic() + grace_s) if first else deadline
    else:
        return
    stop = _Checkpoints.stop or _stop_of(first)
    try:
        line, status = last_word(stop)
    except Exception as exc:  # noqa: BLE001 - the process ends all the same
        line, status = f"{described(stop)}; not stopped within {grace_s:g} s ({exc})", exit_code(stop)
    if not ended.is_set():
        os.write(2, line.encode("utf-8", "replace") + b"\n")
        os._exit(status)
