"""Data-parallel training on PyTorch's own engine: DistributedDataParallel, NCCL on GPUs, gloo on CPU.

Two ways in, one code path: under ``torchrun`` (RANK / WORLD_SIZE / MASTER_ADDR set by it)
every process joins the group from the environment; with ``--nproc N`` the trainer spawns N
local processes itself (``torch.multiprocessing``, spawn start method) that meet through a
file rendezvous in a private temporary folder, so no port is ever guessed. Every rank gets a
contiguous slice of the same global batch; DDP averages the gradients.
"""
from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from pipeline.core.errors import DeepsentError
from pipeline.core.validators import dist_init, env_setting
from pipeline.runtime.interrupt import sigterm_raises


@dataclass(frozen=True)
class DistContext:
    """This process's place in the group (a single process is rank 0 of a world of 1)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    grouped: bool = False  # joined a process group (DDP), also when it has one rank

    @property
    def is_main(self) -> bool:
        """True on the rank that logs, checkpoints and returns the result."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """True when a process group is in use (DDP wraps the model, sums go through it)."""
        return self.grouped


def under_launcher() -> bool:
    """True when started by torchrun (or our own spawner) as a rank of a process group, of one rank too."""
    launched = "TORCHELASTIC_RUN_ID" in os.environ or "DEEPSENT_DIST_INIT" in os.environ
    return "RANK" in os.environ and (int(os.environ.get("WORLD_SIZE", "1")) > 1 or launched)


def join_group(device_type: str) -> DistContext:
    """Join the process group described by the environment (NCCL for CUDA, gloo for CPU)."""
    if not under_launcher():
        return DistContext()
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        init = env_setting("DEEPSENT_DIST_INIT", "env://", dist_init)
        dist.init_process_group(backend=backend, init_method=init,
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    return DistContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), grouped=True)


def describe_group(ctx: DistContext) -> str:
    """``, DDP over nccl`` for a rank of a process group (its backend), else empty."""
    return f", DDP over {dist.get_backend()}" if ctx.active and dist.is_initialized() else ""


def leave_group() -> None:
    """Destroy the process group if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()


def all_sum(values: list[float], ctx: DistContext, device: torch.device) -> list[float]:
    """Element-wise sum of ``values`` over all ranks (the values themselves on a single process)."""
    if not ctx.active:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def broadcast_object(value: Any, ctx: DistContext) -> Any:
    """Rank 0's ``value`` on every rank."""
    if not ctx.active:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _spawned_rank(local_rank: int, nproc: int, rendezvous: str, result_path: str, fn: Callable[..., Any], args: tuple) -> None:
    """Entry point of one spawned rank: set the launcher environment, run ``fn``, keep rank 0's result."""
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(nproc),
                      LOCAL_WORLD_SIZE=str(nproc), DEEPSENT_DIST_INIT=rendezvous)
    try:
        with sigterm_raises():  # the parent forwards SIGTERM: the rank ends its MLflow run KILLED like Ctrl-C
            result = fn(*args)
    except DeepsentError as exc:  # a clear message for the parent, not a worker traceback
        Path(f"{result_path}.error{local_rank}").write_text(str(exc))
        raise
    finally:
        leave_group()
    if local_rank == 0:
        Path(result_path).write_bytes(pickle.dumps(result))


def spawn(nproc: int, fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on ``nproc`` local ranks and return rank 0's (picklable) result.

    All ranks are joined before returning; if one fails, the others are terminated and the
    failure is raised here. When this process is interrupted (Ctrl-C, or SIGTERM inside
    :func:`~pipeline.runtime.interrupt.sigterm_raises`), every rank gets SIGTERM and is waited for, so each
    keeps its checkpoint and ends its MLflow run before the interruption is raised here.
    """
    import torch.multiprocessing as mp

    workdir = tempfile.mkdtemp(prefix="deepsent-ddp-")
    rendezvous = f"file://{Path(workdir) / 'rendezvous'}"
    result_path = str(Path(workdir) / "result.pickle")
    try:
        context = mp.start_processes(_spawned_rank, args=(nproc, rendezvous, result_path, fn, args),
                                     nprocs=nproc, join=False, start_method="spawn")
        try:
            while not context.join():
                pass
        except KeyboardInterrupt:
            _stop_ranks(context.processes)
            raise
        return pickle.loads(Path(result_path).read_bytes())
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
        errors = sorted(Path(workdir).glob("result.pickle.error*"))
        reason = errors[0].read_text() if errors else str(exc).strip().splitlines()[-1]
        raise DeepsentError(f"data-parallel training failed in a worker process: {reason}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _stop_ranks(processes: list[Any], grace_s: float = 60.0) -> None:
    """SIGTERM every live rank, wait up to ``grace_s`` for all, then kill the ones still running."""
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join()
