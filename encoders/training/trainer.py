"""Training as in the paper (Algorithm 1): two towers, eq. (5) loss, eq. (6) Nesterov, per-tower th_G.

``train`` reads the feature shards, trains on one device (CUDA when present) or data-parallel
on several processes, validates every epoch on the held-out click pairs (loss, hit@1 and MRR
of the clicked title among its negatives), checkpoints every epoch to the store, keeps the best
weights, stops early on patience, and records everything in MLflow. ``resume`` continues a
killed run from its last checkpoint and ends where an uninterrupted run would.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from encoders.model import tracking
from encoders.model.device import configure, describe, resolve_device
from encoders.towers.tower_catalog import tower_spec
from encoders.towers.tower_classes import resolve_config
from encoders.towers.twotower import TwoTowerModel
from encoders.training import checkpoint as ckpt
from encoders.training import run_log
from encoders.training.data import FeatureShardDataset
from encoders.training.distributed import (
    DistContext,
    broadcast_object,
    describe_group,
    join_group,
    leave_group,
    spawn,
    under_launcher,
)
from encoders.training.epoch import train_epoch, validate
from encoders.training.optim import build_optimizer, evaluation_weights
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.core.defaults import EPOCHS, GAMMA, NEGATIVES, PATIENCE, PRECISIONS, SEED
from pipeline.core.errors import ConfigError
from pipeline.features.feature_files import load_vocab, read_manifest
from pipeline.features.feature_lookup import resolve_features
from pipeline.runtime.interrupt import held_back
from pipeline.storage.store import Store

log = logging.getLogger(__name__)

#: Step size and th_G chosen on the validation click pairs of the simulated Home Depot log (LSTM
#: ncell 96, n = 4, 5 epochs): eps 0.01/0.03/0.1/0.3 gave valid loss 0.487/0.437/0.408/0.542;
#: at eps 0.1, th_G 0.1/0.3/1 gave 0.407/0.385/0.408 and batch 128/256 gave 0.407/0.408 (512 at
#: eps 0.2: 0.463). gamma stays at 10 as specified; gamma 5 ranked better (hit@1 0.871 vs 0.863).
#: The plain RNN stalls at eps 0.1 (valid loss 1.15 after 5 epochs); eps 0.01/0.03 gave 0.865/0.814.
#: The step sizes live in each tower's SPEC (encoders/towers/tower_catalog.py: DEFAULT_LR, the RNN's lr).
DEFAULT_TH_G, DEFAULT_BATCH_SIZE, VALID_BATCH_SIZE = 0.3, 256, 1024

EpochCallback = Callable[[int, dict[str, Any]], None]


@dataclass
class TrainConfig:
    """Everything that defines a training run (logged as MLflow params)."""

    model: str = "lstm"
    tower: dict[str, Any] = field(default_factory=dict)  # e.g. {"ncell": 96}; defaults per model
    negatives: int = NEGATIVES
    gamma: float = GAMMA
    lr: float | None = None  # None = the model's default step size (its SPEC's lr)
    epochs: int = EPOCHS
    batch_size: int = DEFAULT_BATCH_SIZE
    th_G: float = DEFAULT_TH_G
    patience: int = PATIENCE
    seed: int = SEED
    features_version: str = ""  # "" = features/LATEST, or the matching version for `negatives`
    optimizer: str | None = None  # None = the model's default (its SPEC's: the paper's nesterov, adam to fine-tune)
    precision: str = "fp32"  # or "bf16": bfloat16 autocast on CUDA (pipeline.core.defaults.PRECISIONS)
    nproc: int = 1
    ddp: bool = False  # the data-parallel engine (DDP, NCCL on CUDA) even for nproc 1
    resume: bool = False
    threads: int = 2
    experiment: str = tracking.DEFAULT_EXPERIMENT
    register: bool = True

    def resolved(self) -> "TrainConfig":
        """This config with the default step size filled in, checked (a clear error, not a crash mid-run)."""
        spec = tower_spec(self.model)
        config = dataclasses.replace(self, lr=self.lr if self.lr is not None else spec.step_size,
                                     optimizer=self.optimizer or spec.optimizer)
        config.validate()
        return config

    def validate(self) -> None:
        """Refuse settings that cannot train."""
        checks = {"epochs >= 1": self.epochs >= 1, "batch_size >= 1": self.batch_size >= 1, "lr > 0": (self.lr or 0) > 0,
                  "th_G > 0": self.th_G > 0, "gamma > 0": self.gamma > 0, "patience >= 1": self.patience >= 1,
                  "negatives >= 1": self.negatives >= 1, "nproc >= 1": self.nproc >= 1,
                  f"precision in {PRECISIONS}": self.precision in PRECISIONS}
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            raise ConfigError(f"invalid training config: need {', '.join(failed)}")
        if not tower_spec(self.model).trainable:
            raise ConfigError(f"model {self.model!r} is assembled from trained models, not trained: "
                              "use `deepsent ensemble`")
        resolve_config(self.model, self.tower)


def train(settings: Settings, config: TrainConfig, tags: dict[str, str] | None = None,
          on_epoch_end: EpochCallback | None = None) -> TrainResult:
    """Train ``config`` on the feature shards; returns run id, model URI, registry version, metrics.

    With ``nproc > 1`` (and not already under torchrun) N local ranks are spawned; the
    ``on_epoch_end(epoch, record)`` callback then does not run (it stays in this process).
    """
    config = config.resolved()
    if (config.nproc > 1 or config.ddp) and not under_launcher():
        version = resolve_features(settings, config.features_version, config.negatives).version
        return spawn(config.nproc, _train_rank, settings, dataclasses.replace(config, features_version=version), tags, None)
    return _train_rank(settings, config, tags, on_epoch_end)


def _train_rank(settings: Settings, config: TrainConfig, tags: dict[str, str] | None,
                on_epoch_end: EpochCallback | None) -> TrainResult | None:
    """One process's part of training (the only part on a single device); the result on the main rank."""
    device = resolve_device(settings.device, int(os.environ.get("LOCAL_RANK", "0")))
    configure(device, config.threads, config.seed)
    ctx = join_group(device.type)
    try:
        version = None
        if ctx.is_main:
            version = resolve_features(settings, config.features_version, config.negatives).version
        version = broadcast_object(version, ctx)
        return _Training(settings, dataclasses.replace(config, features_version=version), device, ctx, tags).run(on_epoch_end)
    finally:
        leave_group()


class _Training:
    """State of one training run on one rank: model, optimiser, data, history, best weights."""

    def __init__(self, settings: Settings, config: TrainConfig, device: torch.device, ctx: DistContext,
                 tags: dict[str, str] | None) -> None:
        self.settings, self.config, self.device, self.ctx, self.tags = settings, config, device, ctx, tags or {}
        self.store = Store.from_settings(settings)
        manifest = read_manifest(self.store, config.features_version)
        self.vocab = load_vocab(self.store, manifest)
        self.max_words = int(manifest["params"].get("max_words", 0)) or None
        texts = tower_spec(config.model).inputs == "text"
        self.train_data = FeatureShardDataset(self.store, config.features_version, "train", config.batch_size,
                                              shuffle=True, seed=config.seed, texts=texts).shard_for_rank(ctx.rank, ctx.world)
        self.valid_data = FeatureShardDataset(self.store, config.features_version, "valid", VALID_BATCH_SIZE,
                                              shuffle=False, seed=config.seed, texts=texts).shard_for_rank(ctx.rank, ctx.world)
        if len(self.train_data) == 0 or len(self.valid_data) == 0:
            raise ConfigError(f"features {config.features_version}: no training or validation pairs")
        self.model = TwoTowerModel(config.model, self.vocab.size, config.tower).to(device)
        self.net: torch.nn.Module = self.model
        if ctx.active:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(self.model, device_ids=[device.index] if device.type == "cuda" else None)
        self.total_steps = config.epochs * len(self.train_data)
        self.optimizer = build_optimizer(config.optimizer, self.model.parameters(), config.lr, self.total_steps)
        self.key = ckpt.run_key(ckpt.identity(dataclasses.asdict(config), self.model.config, device.type))
        self.history: list[dict[str, Any]] = []
        self.best: dict[str, Any] = {"epoch": -1, "valid_loss": float("inf"), "state": None}
        self.bad_epochs, self.start_epoch, self.run_id, self.stopped = 0, 0, None, False
        self.resumed_from: int | None = None
        self.at_chance = False

    def run(self, on_epoch_end: EpochCallback | None) -> TrainResult | None:
        """Train epoch after epoch (from a checkpoint when resuming), then log and register the model."""
        started = time.perf_counter()
        finished = ckpt.restore(self)
        if finished is not None:
            return dataclasses.replace(TrainResult.from_dict(finished), resumed_from_epoch=self.resumed_from)
        with run_log.training_run(self.settings, self.config.experiment, self.config.model, self.key, self.run_id,
                                   self.tags, self.ctx.is_main) as active:
            if self.ctx.is_main:
                with held_back():
                    self.run_id = run_log.begin_training(self, active)
            for epoch in range(self.start_epoch, self.config.epochs):
                if self.stopped:
                    break
                record = train_epoch(self, epoch)
                with evaluation_weights(self.optimizer):
                    record.update(validate(self))
                    improved = record["valid_loss"] < self.best["valid_loss"]
                    if improved:
                        self.best = {"epoch": epoch, "valid_loss": record["valid_loss"], "metrics": dict(record),
                                     "state": ckpt.cpu_state(self.model)}
                self.bad_epochs = 0 if improved else self.bad_epochs + 1
                self.stopped = self.bad_epochs >= self.config.patience
                self.history.append(record)
                with held_back():  # a stop lands between epochs' records, never inside a write
                    ckpt.save(self)
                    if self.ctx.is_main:
                        run_log.log_epoch(record, epoch)
                if self.ctx.is_main:
                    log.info("epoch %d/%d: train %.4f valid %.4f acc %.3f mrr %.3f (%.0f ex/s)%s", epoch + 1,
                             self.config.epochs, record["train_loss"], record["valid_loss"], record["valid_acc"],
                             record["valid_mrr"], record["examples_per_s"], " best" if improved else "")
                    if on_epoch_end is not None:
                        on_epoch_end(epoch, record)
            return self._finish(time.perf_counter() - started)

    def _finish(self, seconds: float) -> TrainResult | None:
        """Best weights into the model; plot, vocabulary and model to MLflow; the result."""
        if self.best["state"] is not None:
            self.model.load_state_dict(self.best["state"])
        result = None
        if self.ctx.is_main:
            with held_back():
                best_metrics, throughput = run_log.log_training_summary(
                    self.best, self.history, self.model.param_counts()["total"], seconds)
                self.at_chance = run_log.mark_if_at_chance(best_metrics.get("best_valid_mrr", 0.0),
                                                           self.train_data.num_negatives)
                run_log.log_artifacts_of_training(self.history, self.vocab.to_dict())
                logged = tracking.log_model(self.model, self.vocab, self.max_words, self.config.gamma,
                                            register=self.config.register)
                result = self._result(logged, best_metrics, throughput, seconds)
                ckpt.save(self, result.to_dict())
        return result

    def _result(self, logged: dict[str, Any], best: dict[str, float], throughput: float, seconds: float) -> TrainResult:
        counts = self.model.param_counts()
        last = self.history[-1]
        summary = (f"trained {self.model.name} ({counts['total']:,} parameters, {counts['query']:,} per tower) on "
                   f"{describe(self.device)} x{self.ctx.world}{describe_group(self.ctx)}: {len(self.history)} epochs, best epoch "
                   f"{self.best['epoch'] + 1} valid loss {self.best['valid_loss']:.4f} "
                   f"(hit@1 {best.get('best_valid_acc', 0):.3f}), {throughput:,.0f} examples/s; "
                   f"run {self.run_id}, {logged['registry_uri'] or logged['model_uri']}"
                   + ("; AT CHANCE: the model learned nothing (tag deepsent.at_chance)" if self.at_chance else ""))
        return TrainResult(
            run_id=self.run_id, **logged, model=self.config.model, name=self.model.name,
            best_epoch=self.best["epoch"] + 1, epochs_run=len(self.history), stopped_early=self.stopped,
            best_metric=best.get("best_valid_mrr", 0.0), best_metric_name="valid_mrr",
            metrics={**best, "final_train_loss": last["train_loss"], "final_valid_loss": last["valid_loss"]},
            history=[{k: v for k, v in h.items()} for h in self.history],
            param_count=counts["total"], param_counts=counts, examples_per_s=throughput,
            seconds=seconds, device=describe(self.device) + describe_group(self.ctx), nproc=self.ctx.world,
            features_version=self.config.features_version, vocab_size=self.vocab.size,
            checkpoint=self.store.uri(ckpt.checkpoint_path(self.key, self.run_id)), resumed_from_epoch=self.resumed_from,
            summary=summary,
        )
