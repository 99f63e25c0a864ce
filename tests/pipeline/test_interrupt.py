"""SIGTERM handled like Ctrl-C, and held back while a write that must stay whole is in progress."""
from __future__ import annotations

import os
import signal

import pytest

from pipeline.runtime.interrupt import Terminated, exit_code, held_back, sigterm_raises


def test_sigterm_raises_terminated_and_the_previous_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_raises():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
    assert signal.getsignal(signal.SIGTERM) == before
    assert exit_code(Terminated()) == 143 and exit_code(KeyboardInterrupt()) == 130


def test_a_sigterm_inside_a_held_back_write_is_raised_after_it() -> None:
    steps: list[str] = []
    with pytest.raises(Terminated):
        with sigterm_raises():
            with held_back():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):
                    pass
                steps.append("write finished")  # not cut in half
                with held_back():  # nested blocks raise only when the outermost ends
                    steps.append("inner write finished")
                steps.append("outer write finished")
            steps.append("never reached")
    assert steps == ["write finished", "inner write finished", "outer write finished"]
