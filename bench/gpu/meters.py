"""What a GPU benchmark needs beside the rates: utilisation while it runs, matrix FLOPs of a step, peak rates.

* :class:`Utilisation` samples ``torch.cuda.utilization`` (NVML: the share of time a kernel was
  running) in a background thread while a measurement runs.
* :func:`matmul_flops` counts the matrix-multiply FLOPs of one call with torch's ``FlopCounterMode``
  (mm, addmm, bmm, convolutions: forward and backward). Embedding bags and element-wise work are not
  matrix work and are not counted.
* :func:`peak_matmul_flops` measures the device's dense matrix rate once (8192^3 products, median of
  timed repeats after warm-up, random data), so "fraction of peak" uses this card's ceiling, not a
  datasheet's.
"""
from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable

import torch


class Utilisation:
    """Context manager: mean and max GPU utilisation (%) sampled every ``interval_s`` while inside."""

    def __init__(self, device: torch.device, interval_s: float = 0.05) -> None:
        self.device, self.interval_s = device, interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(float(torch.cuda.utilization(self.device)))
            except Exception:  # noqa: BLE001 - NVML absent: no samples, reported as None
                return
            time.sleep(self.interval_s)

    def __enter__(self) -> "Utilisation":
        if self.device.type == "cuda":
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def summary(self) -> dict[str, float | None]:
        """``gpu_util_mean`` / ``gpu_util_max`` in percent (None without samples)."""
        if not self.samples:
            return {"gpu_util_mean": None, "gpu_util_max": None}
        return {"gpu_util_mean": statistics.fmean(self.samples), "gpu_util_max": max(self.samples)}


def matmul_flops(fn: Callable[[], Any]) -> int:
    """Matrix-multiply FLOPs of one call of ``fn`` (forward and backward if ``fn`` runs both)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def peak_matmul_flops(device: torch.device, dtype: torch.dtype, size: int = 8192, repeats: int = 10) -> float:
    """Measured dense matrix rate of ``device`` in FLOP/s for ``dtype`` (float32 as torch runs it: no TF32)."""
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * size**3 / statistics.median(times)


def device_facts(device: torch.device) -> dict[str, Any]:
    """GPU name, memory, multiprocessors, capability and the torch/CUDA versions (empty on CPU)."""
    if device.type != "cuda":
        return {}
    props = torch.cuda.get_device_properties(device)
    return {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count, "capability": f"{props.major}.{props.minor}",
            "cuda": torch.version.cuda, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
