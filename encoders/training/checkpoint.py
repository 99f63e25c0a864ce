"""Training checkpoints in the store: one atomic file per training run, rewritten every epoch.

``checkpoints/<config key>/<MLflow run id>/last.pt`` holds everything a stopped run needs to
continue exactly where it stopped: the model and optimiser state, the best weights so far, the
per-epoch history, the early-stopping counter and the MLflow run id; ``progress.json`` beside it
(epoch, finished, saved_at) lets ``--resume`` choose without loading every checkpoint. Keyed by
run, a new run of a config never overwrites another run's checkpoint: ``--resume`` continues the
newest unfinished run of the config, else returns the newest finished run's result. Files are
written with the store's atomic write, so a kill during a write leaves the previous epoch's intact.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from typing import Any

import torch

from encoders.training.distributed import broadcast_object
from pipeline.storage.store import Store
from pipeline.storage.locations import working

log = logging.getLogger(__name__)

CHECKPOINT_ROOT = working("checkpoints")
PROGRESS = "progress.json"


def run_key(identity: dict[str, Any]) -> str:
    """Stable key of a training configuration (what makes two runs the same run)."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


def checkpoint_path(key: str, run_id: str | None = None) -> str:
    """Store path of the checkpoint of run ``run_id`` of config ``key`` (no run id: the older per-config file)."""
    return f"{CHECKPOINT_ROOT}/{key}/{run_id}/last.pt" if run_id else f"{CHECKPOINT_ROOT}/{key}/last.pt"


def save_checkpoint(store: Store, key: str, state: dict[str, Any]) -> str:
    """Atomically write ``state`` (tensors, numbers, strings, lists, dicts) as the checkpoint of its run
    ``state["run_id"]``, then that run's progress; returns the checkpoint's URI."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path = checkpoint_path(key, state["run_id"])
    uri = store.write_bytes(path, buffer.getvalue())
    store.write_json(path.replace("last.pt", PROGRESS), {"run_id": state["run_id"], "epoch": state["epoch"],
                                                         "finished": state["result"] is not None, "saved_at": time.time()})
    return uri


def load_checkpoint(store: Store, path: str) -> dict[str, Any] | None:
    """The checkpoint at store ``path``, or None when there is none (loaded on CPU, weights only)."""
    if not store.exists(path):
        return None
    return torch.load(io.BytesIO(store.read_bytes(path)), map_location="cpu", weights_only=True)


def resumable(store: Store, key: str) -> str | None:
    """Store path of the checkpoint ``--resume`` continues for config ``key``: the newest unfinished run's,
    else the newest finished run's, else the per-config file of older versions; None when there is none."""
    runs = []
    for run_id in store.list_dirs(f"{CHECKPOINT_ROOT}/{key}"):
        path = checkpoint_path(key, run_id)
        if store.exists(path):
            progress_path = path.replace("last.pt", PROGRESS)
            progress = store.read_json(progress_path) if store.exists(progress_path) else {}
            runs.append((not progress.get("finished", False), progress.get("saved_at", 0.0), path))
    if runs:
        return max(runs)[2]
    return checkpoint_path(key) if store.exists(checkpoint_path(key)) else None


def cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s state dict."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


# ---- a training run's state <-> its checkpoint ----------------------------------------------
# ``training`` below is the trainer's per-rank state (encoders.training.trainer._Training): store, key,
# ctx, config.resume, model, optimizer, history, best, bad_epochs, start_epoch, run_id, stopped,
# resumed_from.

#: Config fields that say how a run is executed, not what it computes (not part of its key).
EXECUTION_FIELDS = ("resume", "threads", "nproc", "ddp", "register", "experiment")


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
    if not training.config.resume:
        return None
    path = broadcast_object(resumable(store, key) if is_main else None, training.ctx)
    state = load_checkpoint(store, path) if path else None
    if state is None:
        if is_main:
            log.info("--resume: no checkpoint under %s, starting a new run", store.uri(f"{CHECKPOINT_ROOT}/{key}"))
        return None
    training.model.load_state_dict(state["model"])
    training.optimizer.load_state_dict(state["optimizer"])
    training.history, training.best, training.bad_epochs = state["history"], state["best"], state["bad_epochs"]
    training.start_epoch, training.run_id, training.stopped = state["epoch"], state["run_id"], state["stopped"]
    training.resumed_from = training.start_epoch
    if is_main:
        log.info("resuming run %s after epoch %d from %s", training.run_id, training.start_epoch, store.uri(path))
    return state.get("result")
