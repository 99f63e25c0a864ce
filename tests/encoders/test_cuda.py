"""Training and embedding on a CUDA GPU agree with the CPU (marked ``cuda``; skipped where no GPU is).

Tolerance, fp32 (TF32 off, as ``encoders.model.device.configure`` sets it): each update's loss on CUDA within
1e-4 relative of the CPU's, over 30 updates from the same weights on the same batches; the trainer's
per-epoch losses within 1e-3 relative (cuBLAS and the CPU sum in different orders, and the difference
grows through training). bf16 mixed precision is not held to the CPU: its curve stays within 5e-2.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
import torch

from encoders.towers.batch import PairBatch
from encoders.towers.tower_catalog import tower_names
from encoders.towers.twotower import TwoTowerModel
from encoders.training.epoch import update_step
from encoders.training.optim import build_optimizer
from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import Settings

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")]

SMALL: dict[str, dict[str, Any]] = {"lstm": {"ncell": 16}, "bilstm": {"ncell": 8}, "rnn": {"nhid": 16},
                                    "dssm": {"nhid": 32, "nout": 16}, "clsm": {"nhid": 32, "nout": 16}}
TRAIN: dict[str, Any] = dict(tower={"ncell": 16}, epochs=3, batch_size=32, lr=0.05, th_G=1.0, patience=10, seed=3,
                             threads=1)


@pytest.fixture(autouse=True)
def float32_means_float32() -> None:
    """What ``configure`` sets for a CUDA run, for the tests that call the model directly."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _curve(model: TwoTowerModel, batches: list[PairBatch], device: str, precision: str = "fp32") -> list[float]:
    model = copy.deepcopy(model).to(device)
    optimizer = build_optimizer("nesterov", model.parameters(), lr=0.05, total_steps=len(batches))
    losses = []
    for batch in batches:
        loss, _ = update_step(model, model.towers(), optimizer, batch.to(device), gamma=10.0, th_g=1.0,
                              loss_scale=1.0 / batch.size, precision=precision)
        losses.append(loss.item() / batch.size)
    return losses


@pytest.mark.parametrize("model_type", tower_names("trigrams"))
def test_every_tower_follows_the_cpu_loss_curve_on_cuda(model_type: str, make_pairs: Callable[..., PairBatch]) -> None:
    torch.manual_seed(0)
    model = TwoTowerModel(model_type, 60, SMALL[model_type])
    batches = [make_pairs(24, negatives=4, vocab_size=60, seed=s) for s in range(30)]
    cpu, cuda = _curve(model, batches, "cpu"), _curve(model, batches, "cuda")
    assert cuda == pytest.approx(cpu, rel=1e-4)
    assert cpu[-1] < cpu[0]  # it trained
    bf16 = _curve(model, batches, "cuda", "bf16")
    assert bf16 == pytest.approx(cpu, rel=5e-2)


def test_the_trainer_on_cuda_follows_the_cpu(make_train_settings: Callable[[str], Settings]) -> None:
    cpu = train(make_train_settings("cpu"), TrainConfig(**TRAIN))
    settings = make_train_settings("cuda").with_overrides(device="cuda")
    cuda = train(settings, TrainConfig(**TRAIN))
    assert cuda.device.startswith("cuda")
    for ours, theirs in zip(cuda.history, cpu.history):
        assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-3)
        assert ours["valid_loss"] == pytest.approx(theirs["valid_loss"], rel=1e-3)
        assert ours["step_losses"] == pytest.approx(theirs["step_losses"], rel=1e-3)


def test_a_checkpoint_written_on_cuda_resumes_on_cuda(make_train_settings: Callable[[str], Settings],
                                                      train_until_checkpoint: Callable[..., Any]) -> None:
    import signal

    settings = make_train_settings("resume").with_overrides(device="cuda")
    flags = ["--model", "lstm", "--ncell", "16", "--epochs", "3", "--batch-size", "32", "--lr", "0.05", "--th-g", "1",
             "--patience", "10", "--seed", "3", "--device", "cuda", "--threads", "1"]
    proc = train_until_checkpoint(settings, flags)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-2000:]
    resumed = train(settings, TrainConfig(**{**TRAIN, "resume": True}))
    assert resumed.resumed_from_epoch is not None and 1 <= resumed.resumed_from_epoch < 3
    uninterrupted = train(make_train_settings("whole").with_overrides(device="cuda"), TrainConfig(**TRAIN))
    for a, b in zip(resumed.history, uninterrupted.history):
        assert a["valid_loss"] == pytest.approx(b["valid_loss"], rel=1e-5)


@pytest.mark.parametrize(("trained_on", "embedded_on"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_model_trained_on_one_device_embeds_the_same_on_the_other(
        make_train_settings: Callable[[str], Settings], trained_on: str, embedded_on: str) -> None:
    from encoders.model.loading import load_encoder

    settings = make_train_settings(trained_on).with_overrides(device=trained_on)
    result = train(settings, TrainConfig(**{**TRAIN, "epochs": 1}))
    texts = ["cordless drill", "18 volt lithium ion battery charger", "x"]
    here = load_encoder(result.model_uri, settings, device=trained_on).encode(texts, "doc")
    there = load_encoder(result.model_uri, settings, device=embedded_on).encode(texts, "doc")
    assert there.shape == here.shape
    torch.testing.assert_close(torch.from_numpy(there), torch.from_numpy(here), rtol=1e-4, atol=1e-5)


def test_ddp_with_nccl_trains_one_rank(make_train_settings: Callable[[str], Settings]) -> None:
    settings = make_train_settings("ddp").with_overrides(device="cuda")
    result = train(settings, TrainConfig(**{**TRAIN, "epochs": 2, "ddp": True}))
    assert "DDP over nccl" in result.device and result.nproc == 1
    single = train(make_train_settings("single").with_overrides(device="cuda"), TrainConfig(**{**TRAIN, "epochs": 2}))
    for a, b in zip(result.history, single.history):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
