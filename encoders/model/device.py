"""Where training and embedding run: CUDA when present (``auto``), else CPU with a fixed thread count; in which precision."""
from __future__ import annotations

from typing import Any

import torch

from pipeline.core.defaults import DEVICES
from pipeline.core.errors import ConfigError


def resolve_device(requested: str = "auto", local_rank: int = 0) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is a clear error."""
    if requested not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available (torch.cuda.is_available() is False)")
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def configure(device: torch.device, threads: int, seed: int | None = None) -> None:
    """Thread count on CPU (intra-op) or the current CUDA device, and the seed of every torch generator."""
    if device.type == "cpu" and threads > 0:
        torch.set_num_threads(threads)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # one GPU per process (NCCL needs it before the group forms)
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 means float32 (TF32 would round to 10 bits);
        torch.backends.cudnn.allow_tf32 = False  # --precision bf16 is the fast arithmetic, chosen explicitly
    if seed is not None:
        torch.manual_seed(seed)


def describe(device: torch.device) -> str:
    """Human-readable device, e.g. ``cpu (2 threads)`` or ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def autocast(device: torch.device, precision: str) -> Any:
    """The arithmetic context of a forward pass: bfloat16 autocast for ``bf16``, plain float32 otherwise."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
