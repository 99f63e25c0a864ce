"""The thread's alternate signal stack, kept across code that swaps it (OpenVINO's CPU plugin; see
:func:`signal_stack_kept`)."""
from __future__ import annotations

import ctypes
import signal
from contextlib import contextmanager
from typing import Any, Iterator


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
