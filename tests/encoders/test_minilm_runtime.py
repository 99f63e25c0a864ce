"""MiniLM's CPU inference through OpenVINO: the vectors torch gives, torch kept wherever gradients flow."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from encoders.model.text_encoder import TextEncoder
from encoders.towers.batch import TextBatch
from encoders.towers.minilm_runtime import ENV, CompiledMiniLM, inference_runtime
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.config import PROJECT_ROOT
from pipeline.core.errors import ConfigError
from pipeline.features.trigram import TrigramVocab, word_trigrams

TEXTS = ["cordless drill", "20v max lithium ion cordless drill kit with two batteries and a charger", "60w led bulb",
         "garden hose 50 ft", "toilet flapper", "1/2 in. x 10 ft. copper pipe type l"]


def _encoder(monkeypatch: pytest.MonkeyPatch, runtime: str) -> TextEncoder:
    monkeypatch.setenv(ENV, runtime)
    vocab = TrigramVocab.from_counts({t: 1 for w in "cordless drill".split() for t in word_trigrams(w)})
    return TextEncoder(TwoTowerModel("minilm", vocab.size, {"shared": True, "max_tokens": 32}), vocab, 8)


@pytest.mark.heavy  # over 10 s: left out of make check
def test_a_loaded_minilm_encodes_through_openvino_with_torchs_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _encoder(monkeypatch, "openvino")
    reference = _encoder(monkeypatch, "torch")
    tower = compiled.tower("doc")
    assert isinstance(tower.compiled, CompiledMiniLM) and reference.tower("doc").compiled is None
    ours, theirs = compiled.encode(TEXTS, "doc"), reference.encode(TEXTS, "doc")
    assert tower.compiled._compiled is not None  # the compiled graph ran, not the torch modules
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    cosine = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosine.min() > 0.99999


@pytest.mark.heavy  # over 10 s: left out of make check
def test_gradients_and_a_forked_process_keep_what_they_need(monkeypatch: pytest.MonkeyPatch) -> None:
    tower = _encoder(monkeypatch, "openvino").tower("query")
    with torch.enable_grad():
        trained = tower(TextBatch(TEXTS[:2]))
    assert trained.requires_grad  # training and fine-tuning go through torch
    with torch.no_grad():
        first = tower(TextBatch(TEXTS[:2]))
        compiled = tower.compiled._compiled
        tower.compiled._pid = -1  # as in a forked Dask worker: the parent's compiled model is not reused
        again = tower(TextBatch(TEXTS[:2]))
    assert tower.compiled._compiled is not compiled and torch.equal(first, again)


def test_the_runtime_is_named_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "torch")
    assert inference_runtime() == "torch"
    monkeypatch.delenv(ENV)
    assert inference_runtime() == "openvino"  # installed with the minilm extra
    monkeypatch.setenv(ENV, "tensorrt")
    with pytest.raises(ConfigError, match="DEEPSENT_MINILM_RUNTIME: 'tensorrt' is not one of openvino, torch"):
        inference_runtime()


SIGNAL_AFTER_TWO_MODELS = """
import os, signal, time
import torch
from transformers import BertConfig, BertModel
from encoders.towers.minilm_runtime import CompiledMiniLM
from pipeline.runtime.interrupt import Terminated, sigterm_raises

ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
features = {"input_ids": ids, "attention_mask": (ids > 0).long(), "token_type_ids": torch.zeros_like(ids)}
bert = BertModel(BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=16)).eval()
first, second = CompiledMiniLM(bert), CompiledMiniLM(bert)
with torch.no_grad():
    first(features), second(features)
del first  # the compiled models go in the order they came
del second
try:
    with sigterm_raises():
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pass
    print("no SIGTERM arrived")
except Terminated:
    print("SIGTERM raised Terminated")
"""


@pytest.mark.heavy  # over 10 s: left out of make check
def test_a_signal_after_two_compiled_models_are_gone_is_handled_not_a_crash() -> None:
    # OpenVINO's CPU plugin swaps the thread's alternate signal stack while it compiles and puts the previous one
    # back when a model goes: models that went first-in first-out left a freed stack behind, and the next signal
    # with a Python handler killed the process with SIGSEGV (the crashed pytest workers of the suite).
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AFTER_TWO_MODELS], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "SIGTERM raised Terminated"
