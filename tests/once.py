"""Costly fixtures built once per suite, not once per pytest-xdist worker.

A ``scope="session"`` fixture runs once in *each* worker that needs it: on three workers a whole-chain run
could happen three times. :func:`once_per_suite` builds the value in the first worker that asks, under a file
lock in the folder all workers share, pickles it there, and every other worker reads it back. Values must be
picklable and describe files under ``root`` (the readers treat those files as read-only; a test that writes
copies them first). Without xdist it is a plain session-wide cache.
"""
from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path
from typing import Callable, TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every worker of this pytest run sees (the workers' own base folders sit in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_suite(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]) -> T:
    """``build(root)`` run once per pytest run for ``name`` (in whichever worker asks first); the others wait and
    read the same value. A build that raised is tried again by the next worker that asks."""
    base = shared_root(tmp_path_factory)
    root, value_file = base / f"once-{name}", base / f"once-{name}.pickle"
    with FileLock(str(base / f"once-{name}.lock")):
        if value_file.exists():
            return pickle.loads(value_file.read_bytes())
        shutil.rmtree(root, ignore_errors=True)  # what a failed build left
        root.mkdir()
        value = build(root)
        partial = value_file.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(value_file)
        return value
