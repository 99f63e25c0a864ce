"""Training checkpoints in the store: one atomic file per run key, rewritten every epoch.

A checkpoint holds everything a killed run needs to continue exactly where it stopped:
the model and optimiser state, the best weights so far, the per-epoch history, the
early-stopping counter and the MLflow run id. It is written with the store's atomic write,
so a kill during the write leaves the previous epoch's checkpoint intact.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import torch

from pipeline.store import Store

CHECKPOINT_ROOT = "checkpoints"


def run_key(identity: dict[str, Any]) -> str:
    """Stable key of a training configuration (what makes two runs the same run)."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def checkpoint_path(key: str) -> str:
    """Store path of the checkpoint of run ``key``."""
    return f"{CHECKPOINT_ROOT}/{key}/last.pt"


def save_checkpoint(store: Store, key: str, state: dict[str, Any]) -> str:
    """Atomically write ``state`` (tensors, numbers, strings, lists, dicts); returns its URI."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return store.write_bytes(checkpoint_path(key), buffer.getvalue())


def load_checkpoint(store: Store, key: str) -> dict[str, Any] | None:
    """The checkpoint of run ``key``, or None when there is none (loaded on CPU, weights only)."""
    path = checkpoint_path(key)
    if not store.exists(path):
        return None
    return torch.load(io.BytesIO(store.read_bytes(path)), map_location="cpu", weights_only=True)


def cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s state dict."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
