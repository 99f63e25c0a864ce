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
import logging
from typing import Any

import torch

from pipeline.store import Store

log = logging.getLogger(__name__)

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


# ---- a training run's state <-> its checkpoint ----------------------------------------------
# ``training`` below is the trainer's per-rank state (encoders.trainer._Training): store, key,
# ctx, config.resume, model, optimizer, history, best, bad_epochs, start_epoch, run_id, stopped,
# resumed_from.

#: Config fields that say how a run is executed, not what it computes (not part of its key).
EXECUTION_FIELDS = ("resume", "threads", "nproc", "register", "experiment")


def identity(config: dict[str, Any], tower: dict[str, Any], device_type: str) -> dict[str, Any]:
    """What makes two runs the same run (the checkpoint key): config minus how it is executed."""
    ident = {k: v for k, v in config.items() if k not in EXECUTION_FIELDS}
    return {**ident, "tower": tower, "device": device_type}


def save(training: Any, result: dict[str, Any] | None = None) -> None:
    """Checkpoint ``training`` after its last finished epoch (main rank only)."""
    if not training.ctx.is_main:
        return
    save_checkpoint(training.store, training.key, {
        "epoch": len(training.history), "model": training.model.state_dict(),
        "optimizer": training.optimizer.state_dict(), "history": training.history, "best": training.best,
        "bad_epochs": training.bad_epochs, "run_id": training.run_id, "stopped": training.stopped, "result": result,
    })


def restore(training: Any) -> dict[str, Any] | None:
    """Continue ``training`` from its last checkpoint when resuming; returns a finished run's result."""
    store, key, is_main = training.store, training.key, training.ctx.is_main
    state = load_checkpoint(store, key) if training.config.resume else None
    if state is None:
        if training.config.resume and is_main:
            log.info("--resume: no checkpoint at %s, starting a new run", store.uri(checkpoint_path(key)))
        return None
    training.model.load_state_dict(state["model"])
    training.optimizer.load_state_dict(state["optimizer"])
    training.history, training.best, training.bad_epochs = state["history"], state["best"], state["bad_epochs"]
    training.start_epoch, training.run_id, training.stopped = state["epoch"], state["run_id"], state["stopped"]
    training.resumed_from = training.start_epoch
    if is_main:
        log.info("resuming run %s after epoch %d from %s", training.run_id, training.start_epoch,
                 store.uri(checkpoint_path(key)))
    return state.get("result")
