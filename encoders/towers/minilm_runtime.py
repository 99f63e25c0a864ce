"""MiniLM's inference on CPU through OpenVINO: the same transformer and mean pooling, 1.6x the titles/s of torch here.

``bench/stages/minilm_runtime.py`` measured, side by side in one run on the shipped ensemble's MiniLM half
(``bench/results/minilm-runtime.json``): torch fp32 (the reference), torch's dynamic int8, ONNX Runtime fp32 and
dynamic int8, OpenVINO fp32. Only the fp32 runtimes kept parity (cosine to torch 1.0, the dev table's MiniLM row
and every served figure equal); OpenVINO was the fastest of them, so a loaded model's MiniLM tower runs through it
on CPU (:meth:`encoders.towers.minilm.MiniLMTower.freeze_for_inference`, called by
:class:`~encoders.model.text_encoder.TextEncoder`). Training, gradients and CUDA keep torch. The tower is converted
(``openvino.convert_model``, about 2 s) on its first batch in each process, at fp32 precision, with torch's
thread count. ``DEEPSENT_MINILM_RUNTIME=torch`` keeps torch. The rule for the processes that run it is here,
:func:`worker_rule`, and the Dask cluster of a caller asks it: a process forked after OpenVINO ran in its parent
hangs when it compiles a model of its own (``deepsent run`` ran one in its ensemble stage), so under OpenVINO
local Dask workers are spawned, each converting its own; each takes its share of the cores as threads.
Each thread infers through its own infer request (a compiled model's call reuses one, which threads would share: a
server answers queries on several). OpenVINO's CPU plugin swaps the thread's alternate signal stack while it compiles and when a model goes, which
could leave a freed one behind: compiling and dropping run inside
:func:`pipeline.runtime.signal_stack.signal_stack_kept`.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import threading
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from pipeline.core import validators
from pipeline.core.errors import ConfigError
from pipeline.runtime.signal_stack import signal_stack_kept

if TYPE_CHECKING:
    from pipeline.runtime.dask_cluster import WorkerRule

ENV = "DEEPSENT_MINILM_RUNTIME"
RUNTIMES = validators.MINILM_RUNTIMES
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def inference_runtime() -> str:
    """The runtime of MiniLM's CPU inference: ``DEEPSENT_MINILM_RUNTIME``, else openvino when installed, else torch."""
    chosen = validators.checked(ENV, validators.minilm_runtime, os.environ.get(ENV, ""))  # as Settings checks it
    if chosen == "torch":
        return "torch"
    if importlib.util.find_spec("openvino") is None:
        if chosen == "openvino":
            raise ConfigError(f"{ENV}=openvino but openvino is not installed (the project's 'minilm' extra)")
        return "torch"
    return "openvino"


def worker_rule() -> "WorkerRule":
    """How local Dask workers that may run MiniLM start: spawned under OpenVINO (a fork of a process where it ran
    hangs), forked under torch; each with its share of the cores as threads (:func:`share_cores`)."""
    from pipeline.runtime.dask_cluster import WorkerRule

    return WorkerRule(forks=inference_runtime() == "torch", setup=share_cores)


def share_cores(workers: int) -> None:
    """Torch's threads in this process (and so OpenVINO's): its share of the cores among ``workers`` processes."""
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


class MeanPooled(nn.Module):
    """The transformer and its mask-weighted mean pooling as one graph (what the tower's two modules compute)."""

    def __init__(self, auto_model: nn.Module) -> None:
        super().__init__()
        self.auto_model = auto_model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """Mean-pooled token vectors ``[B, d]``."""
        tokens = self.auto_model(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        return (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class CompiledMiniLM:
    """A MiniLM transformer compiled by OpenVINO for this process's CPU: tokenised features in, pooled vectors out."""

    def __init__(self, auto_model: nn.Module) -> None:
        self.auto_model = auto_model
        self._compiled: Any = None
        self._pid = 0
        self._requests = threading.local()  # one infer request per thread: a compiled model's own is not thread-safe

    def __call__(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean-pooled vectors ``[B, d]`` of one tokenised batch."""
        inputs = {name: features[name].cpu().numpy().astype(np.int64) for name in INPUTS}
        if self._compiled is None or self._pid != os.getpid():
            with signal_stack_kept():  # OpenVINO swaps the thread's signal stack (see signal_stack_kept)
                self._compile(inputs)
        compiled = self._compiled
        made_from, request = getattr(self._requests, "pair", (None, None))
        if made_from is not compiled:
            request = compiled.create_infer_request()
            self._requests.pair = (compiled, request)
        return torch.from_numpy(np.array(request.infer(inputs)[0], dtype=np.float32))

    def __del__(self) -> None:
        if getattr(self, "_compiled", None) is not None:
            try:
                with signal_stack_kept():  # the compiled model puts back the signal stack it replaced: keep ours
                    self._compiled = None
            except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone; nothing is left to protect
                pass

    def _compile(self, inputs: dict[str, np.ndarray]) -> None:
        import openvino as ov

        example = {name: torch.from_numpy(values[:2]) for name, values in inputs.items()}
        quiet = logging.getLogger("transformers")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracing warnings about Python-side shape checks
                model = ov.convert_model(MeanPooled(self.auto_model).eval(), example_input=example)
        finally:
            quiet.setLevel(level)
        config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": torch.get_num_threads(),
                  "ENABLE_CPU_PINNING": False}  # processes sharing the cores (Dask workers) would pin to the same one
        self._compiled, self._pid = ov.Core().compile_model(model, "CPU", config), os.getpid()
