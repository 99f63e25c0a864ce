"""The MiniLM runtime declares how the Dask workers that may run it start, and the cluster asks it: spawned under
OpenVINO (a process forked after OpenVINO ran in its parent hangs compiling its own model), forked under torch,
each with its share of the cores as torch threads."""
from __future__ import annotations

import os

import pytest

from encoders.towers.minilm_runtime import ENV, worker_rule
from pipeline.core.config import Settings
from pipeline.runtime.dask_cluster import WorkerRule, dask_client


def _inherited() -> object:
    """The marker the test process set on a module: a forked worker has it, a spawned one imported the module anew."""
    import json

    return getattr(json, "deepsent_test_marker", None)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def test_the_runtime_declares_whether_its_workers_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "openvino")
    assert worker_rule().forks is False
    monkeypatch.setenv(ENV, "torch")
    assert worker_rule().forks is True
    assert WorkerRule().forks is True and WorkerRule().setup is None  # what other callers of the cluster get


def test_the_cluster_starts_its_workers_as_the_runtime_says(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setattr(json, "deepsent_test_marker", os.getpid(), raising=False)
    monkeypatch.setenv(ENV, "openvino")
    local = settings.with_overrides(dask_workers=1, dask_address="")
    with dask_client(local, rule=worker_rule()) as client:
        (marker,), (threads,) = client.run(_inherited).values(), client.run(_threads).values()
    assert marker is None  # spawned
    assert threads == max(1, os.cpu_count() or 1)  # one worker: every core
    with dask_client(local) as client:  # no rule: forked, as featurize and ingest want
        (marker,) = client.run(_inherited).values()
    assert marker == os.getpid()
