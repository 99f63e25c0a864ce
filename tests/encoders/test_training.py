"""The trainer on a tiny real feature set: learning, checkpoints, early stopping, resume after a kill."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any, Callable

import pytest
import torch

from encoders.checkpoint import load_checkpoint
from encoders.trainer import TrainConfig, train
from pipeline.config import PROJECT_ROOT, Settings
from pipeline.store import Store

TINY: dict[str, Any] = dict(model="lstm", tower={"ncell": 16}, epochs=4, batch_size=32, lr=0.05, th_G=1.0,
                            patience=10, seed=3, threads=1)

KILL_AFTER_EPOCH = """
import json, os, signal, sys
from pipeline.config import Settings
from encoders.trainer import TrainConfig, train
settings = Settings.from_env(store=sys.argv[1], mlflow_tracking_uri=sys.argv[2], device="cpu")
def die(epoch, record):
    if epoch == int(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup of any kind, as a real kill
train(settings, TrainConfig(**json.loads(sys.argv[3])), on_epoch_end=die)
"""


def _checkpoint(settings: Settings) -> dict[str, Any]:
    store = Store.from_settings(settings)
    (key,) = store.list_dirs("checkpoints")
    state = load_checkpoint(store, key)
    assert state is not None
    return state


def _losses(history: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    return [(h["train_loss"], h["valid_loss"], h["valid_acc"]) for h in history]


def test_training_learns_and_keeps_the_best_epoch(train_settings: Settings) -> None:
    result = train(train_settings, TrainConfig(**TINY))
    history = result.history
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    assert history[-1]["train_loss"] < 0.8 * history[0]["train_loss"]
    assert max(h["valid_acc"] for h in history) > 0.4  # chance is 1 in 5
    assert result.best_epoch == min(range(4), key=lambda e: history[e]["valid_loss"])
    assert result.param_count == result.param_counts["query"] * 2
    assert result.best_metric == result.metrics["best_valid_mrr"] == history[result.best_epoch]["valid_mrr"]
    state = _checkpoint(train_settings)
    assert state["epoch"] == 4 and state["result"]["run_id"] == result.run_id
    # a --resume of a finished run returns its result instead of training again
    again = train(train_settings, TrainConfig(**{**TINY, "resume": True}))
    assert again.run_id == result.run_id and again.resumed_from_epoch == 4


def test_early_stopping_on_patience(train_settings: Settings) -> None:
    result = train(train_settings, TrainConfig(**{**TINY, "lr": 3.0, "th_G": 50.0, "epochs": 8, "patience": 1}))
    assert result.stopped_early
    assert result.epochs_run == result.best_epoch + 2 < 8
    losses = [h["valid_loss"] for h in result.history]
    assert result.metrics["best_valid_loss"] == min(losses)


def test_resume_after_kill_equals_uninterrupted(make_train_settings: Callable[[str], Settings]) -> None:
    whole, killed = make_train_settings("whole"), make_train_settings("killed")
    uninterrupted = train(whole, TrainConfig(**TINY))
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_EPOCH, killed.store, killed.mlflow_tracking_uri,
                           json.dumps(TINY), "1"], cwd=PROJECT_ROOT, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    before = _checkpoint(killed)
    assert before["epoch"] == 2 and before["result"] is None
    resumed = train(killed, TrainConfig(**{**TINY, "resume": True}))
    assert resumed.resumed_from_epoch == 2 and resumed.run_id == before["run_id"]
    assert _losses(resumed.history) == _losses(uninterrupted.history)
    a, b = _checkpoint(whole), _checkpoint(killed)
    for name in ("model", ):
        assert a[name].keys() == b[name].keys()
        assert all(torch.equal(a[name][k], b[name][k]) for k in a[name])
    assert all(torch.equal(a["best"]["state"][k], b["best"]["state"][k]) for k in a["best"]["state"])
    from mlflow import MlflowClient

    steps = [m.step for m in MlflowClient(killed.mlflow_tracking_uri).get_metric_history(resumed.run_id, "valid_loss")]
    assert sorted(steps) == [0, 1, 2, 3]


def test_cli_flags_make_the_config() -> None:
    from deepsent.cli import build_parser
    from deepsent.commands.train import train_config

    args = build_parser().parse_args(["train", "--model", "lstm", "--ncell", "32", "--negatives", "6", "--gamma", "5",
                                      "--epochs", "3", "--lr", "0.2", "--batch-size", "64", "--seed", "9",
                                      "--device", "cpu", "--nproc", "2", "--resume", "--th-g", "0.5"])
    config = train_config(args)
    assert (config.model, config.tower, config.negatives, config.gamma, config.epochs) == ("lstm", {"ncell": 32}, 6, 5.0, 3)
    assert (config.lr, config.batch_size, config.seed, config.nproc, config.resume, config.th_G) == (
        0.2, 64, 9, 2, True, 0.5)
    defaults = train_config(build_parser().parse_args(["train", "--model", "dssm"]))
    assert defaults.tower == {} and defaults.optimizer == "nesterov" and defaults.lr is None
    assert defaults.resolved().lr == 0.1 and TrainConfig(model="rnn").resolved().lr == 0.03


def test_bad_settings_are_clear_errors() -> None:
    from encoders.device import resolve_device
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="model 'dssm' has no setting ncell"):
        TrainConfig(model="dssm", tower={"ncell": 8}).resolved()
    with pytest.raises(ConfigError, match="need epochs >= 1"):
        TrainConfig(epochs=0).resolved()
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows the device through the error of a missing GPU")
def test_training_runs_on_the_device_of_deepsent_device(train_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """DEEPSENT_DEVICE reaches training through the settings alone (TrainConfig has no device of its own)."""
    from pipeline.errors import ConfigError

    monkeypatch.setenv("DEEPSENT_DEVICE", "cuda")
    settings = Settings.from_env(store=train_settings.store, data_dir=str(train_settings.data_dir),
                                 mlflow_tracking_uri=train_settings.mlflow_tracking_uri)
    assert settings.device == "cuda"
    with pytest.raises(ConfigError, match="no CUDA device"):
        train(settings, TrainConfig(**TINY))
