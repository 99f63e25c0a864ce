"""The trainer on a tiny real feature set: learning, checkpoints, early stopping, resume after a kill or SIGTERM."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from encoders.training.checkpoint import checkpoint_path, load_checkpoint
from encoders.training.results import TrainResult
from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.storage.store import Store

TINY: dict[str, Any] = dict(model="lstm", tower={"ncell": 16}, epochs=4, batch_size=32, lr=0.05, th_G=1.0,
                            patience=10, seed=3, threads=1)

KILL_AFTER_EPOCH = """
import json, os, signal, sys
from pipeline.core.config import Settings
from encoders.training.trainer import TrainConfig, train
settings = Settings.from_env(store=sys.argv[1], mlflow_tracking_uri=sys.argv[2], device="cpu")
def die(epoch, record):
    if epoch == int(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup of any kind, as a real kill
train(settings, TrainConfig(**json.loads(sys.argv[3])), on_epoch_end=die)
"""


def _checkpoint(settings: Settings, run_id: str | None = None) -> dict[str, Any]:
    """The checkpoint of run ``run_id`` (default: the only run) of the only config trained in ``settings``' store."""
    store = Store.from_settings(settings)
    (key,) = store.list_dirs("checkpoints")
    if run_id is None:
        (run_id,) = store.list_dirs(f"checkpoints/{key}")
    state = load_checkpoint(store, checkpoint_path(key, run_id))
    assert state is not None
    return state


def _run_status(settings: Settings, run_id: str) -> str:
    from mlflow import MlflowClient

    return MlflowClient(settings.mlflow_tracking_uri).get_run(run_id).info.status


def _assert_same_training(a: Settings, a_run: str, b: Settings, b_run: str) -> None:
    """Both runs' checkpoints hold bit-identical last and best weights."""
    first, second = _checkpoint(a, a_run), _checkpoint(b, b_run)
    for weights in (lambda s: s["model"], lambda s: s["best"]["state"]):
        assert weights(first).keys() == weights(second).keys()
        assert all(torch.equal(weights(first)[k], weights(second)[k]) for k in weights(first))


def _losses(history: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    return [(h["train_loss"], h["valid_loss"], h["valid_acc"]) for h in history]


def test_training_learns_and_keeps_the_best_epoch(train_settings: Settings) -> None:
    result = train(train_settings, TrainConfig(**TINY))
    history = result.history
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]
    assert history[-1]["train_loss"] < 0.8 * history[0]["train_loss"]
    assert max(h["valid_acc"] for h in history) > 0.4  # chance is 1 in 5
    assert result.best_epoch == 1 + min(range(4), key=lambda e: history[e]["valid_loss"])
    assert result.param_count == result.param_counts["query"] * 2
    assert result.best_metric == result.metrics["best_valid_mrr"] == history[result.best_epoch - 1]["valid_mrr"]
    state = _checkpoint(train_settings)
    assert state["epoch"] == 4 and state["result"]["run_id"] == result.run_id
    # a --resume of a finished run returns its result instead of training again
    again = train(train_settings, TrainConfig(**{**TINY, "resume": True}))
    assert again.run_id == result.run_id and again.resumed_from_epoch == 4
    # and so it does from a checkpoint of older versions, one per config (checkpoints/<key>/last.pt)
    store = Store.from_settings(train_settings)
    (key,) = store.list_dirs("checkpoints")
    store.write_bytes(checkpoint_path(key), store.read_bytes(checkpoint_path(key, result.run_id)))
    store.delete(f"checkpoints/{key}/{result.run_id}")
    assert train(train_settings, TrainConfig(**{**TINY, "resume": True})).run_id == result.run_id


def test_early_stopping_on_patience(train_settings: Settings) -> None:
    result = train(train_settings, TrainConfig(**{**TINY, "lr": 3.0, "th_G": 50.0, "epochs": 8, "patience": 1}))
    assert result.stopped_early
    assert result.epochs_run == result.best_epoch + 1 < 8
    losses = [h["valid_loss"] for h in result.history]
    assert result.metrics["best_valid_loss"] == min(losses)


def test_a_new_run_keeps_a_killed_runs_checkpoint_and_resume_finishes_it(
        make_train_settings: Callable[[str], Settings]) -> None:
    settings = make_train_settings("killed")
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_EPOCH, settings.store, settings.mlflow_tracking_uri,
                           json.dumps(TINY), "1"], cwd=PROJECT_ROOT, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    before = _checkpoint(settings)
    assert before["epoch"] == 2 and before["result"] is None
    # the same config again without --resume: a new run, with its own checkpoint beside the killed one's
    uninterrupted = train(settings, TrainConfig(**TINY))
    assert uninterrupted.run_id != before["run_id"]
    kept = _checkpoint(settings, before["run_id"])
    assert kept["epoch"] == 2 and kept["result"] is None and kept["history"] == before["history"]
    # --resume continues the killed run, not the newer finished one, and ends where the uninterrupted run did
    resumed = train(settings, TrainConfig(**{**TINY, "resume": True}))
    assert resumed.resumed_from_epoch == 2 and resumed.run_id == before["run_id"]
    assert _losses(resumed.history) == _losses(uninterrupted.history)
    _assert_same_training(settings, uninterrupted.run_id, settings, resumed.run_id)
    from mlflow import MlflowClient

    steps = [m.step for m in MlflowClient(settings.mlflow_tracking_uri).get_metric_history(resumed.run_id, "valid_loss")]
    assert sorted(steps) == [0, 1, 2, 3]


def test_sigterm_ends_the_run_killed_and_resume_finishes_it(
        make_train_settings: Callable[[str], Settings], train_until_checkpoint: Callable[..., subprocess.Popen]) -> None:
    whole, stopped = make_train_settings("whole"), make_train_settings("sigterm")
    flags = ["--model", "lstm", "--ncell", "16", "--epochs", "4", "--batch-size", "32", "--lr", "0.05", "--th-g", "1.0",
             "--patience", "10", "--seed", "3", "--device", "cpu", "--threads", "1"]
    proc = train_until_checkpoint(stopped, flags)
    proc.send_signal(signal.SIGTERM)  # in the second epoch: the first one's checkpoint was just written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-2000:]
    assert "deepsent: error: terminated (SIGTERM)" in err.decode()
    before = _checkpoint(stopped)
    assert 1 <= before["epoch"] < 4 and before["result"] is None
    assert _run_status(stopped, before["run_id"]) == "KILLED"
    uninterrupted = train(whole, TrainConfig(**TINY))
    resumed = train(stopped, TrainConfig(**{**TINY, "resume": True}))
    assert resumed.run_id == before["run_id"] and resumed.resumed_from_epoch == before["epoch"]
    assert _run_status(stopped, resumed.run_id) == "FINISHED"
    assert (resumed.best_epoch, resumed.metrics) == (uninterrupted.best_epoch, uninterrupted.metrics)
    assert _losses(resumed.history) == _losses(uninterrupted.history)
    _assert_same_training(whole, uninterrupted.run_id, stopped, resumed.run_id)


@pytest.mark.parametrize("interruption", ["KeyboardInterrupt", "AirflowTaskTerminated"])
def test_an_interrupted_run_ends_killed_with_its_checkpoint(train_settings: Settings, interruption: str) -> None:
    from airflow.sdk.exceptions import AirflowTaskTerminated

    error = {"KeyboardInterrupt": KeyboardInterrupt, "AirflowTaskTerminated": AirflowTaskTerminated}[interruption]

    def stop(epoch: int, record: dict[str, Any]) -> None:
        raise error()

    with pytest.raises(error):
        train(train_settings, TrainConfig(**{**TINY, "epochs": 2}), on_epoch_end=stop)
    state = _checkpoint(train_settings)
    assert state["epoch"] == 1 and state["result"] is None
    assert _run_status(train_settings, state["run_id"]) == "KILLED"


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
    assert defaults.tower == {} and defaults.optimizer is None and defaults.lr is None
    assert (defaults.resolved().lr, defaults.resolved().optimizer) == (0.1, "nesterov")
    assert TrainConfig(model="rnn").resolved().lr == 0.03
    assert (TrainConfig(model="minilm").resolved().optimizer, TrainConfig(model="minilm").resolved().lr) == ("adam", 2e-5)
    flagged = train_config(build_parser().parse_args(["train", "--model", "lstm", "--precision", "bf16", "--ddp"]))
    assert (flagged.precision, flagged.ddp, flagged.nproc) == ("bf16", True, 1)


def test_bad_settings_are_clear_errors() -> None:
    from encoders.model.device import resolve_device
    from pipeline.core.errors import ConfigError

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
    from pipeline.core.errors import ConfigError

    monkeypatch.setenv("DEEPSENT_DEVICE", "cuda")
    settings = Settings.from_env(store=train_settings.store, data_dir=str(train_settings.data_dir),
                                 mlflow_tracking_uri=train_settings.mlflow_tracking_uri)
    assert settings.device == "cuda"
    with pytest.raises(ConfigError, match="no CUDA device"):
        train(settings, TrainConfig(**TINY))


def test_a_model_at_chance_is_marked(trained_run: tuple[Settings, TrainResult], tmp_path: Path) -> None:
    import mlflow
    from mlflow import MlflowClient

    from encoders.model import tracking
    from encoders.training.run_log import chance_mrr, mark_if_at_chance

    assert chance_mrr(4) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 5)
    shared, trained = trained_run
    tags = MlflowClient(tracking_uri=shared.mlflow_tracking_uri).get_run(trained.run_id).data.tags
    assert tags["deepsent.at_chance"] == "false" and "AT CHANCE" not in trained.summary  # it learned
    settings = shared.with_overrides(mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with tracking.run(settings, "chance") as active:
        assert mark_if_at_chance(chance_mrr(4) + 0.01, 4) is True
    assert MlflowClient(tracking_uri=settings.mlflow_tracking_uri).get_run(active.info.run_id).data.tags[
        "deepsent.at_chance"] == "true"
    mlflow.set_tracking_uri(shared.mlflow_tracking_uri)
