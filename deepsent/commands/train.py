"""``deepsent train``: two towers on the click features, MLflow run + registered model."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from encoders.towers.tower_catalog import models_with, tower_settings, towers, trainable_tower_names
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.defaults import DEVICES, EPOCHS, GAMMA, NEGATIVES, PATIENCE, PRECISIONS, SEED


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``train`` to the CLI."""
    tr = subparsers.add_parser(
        "train", parents=[common], help="train a two-tower model on the click features (MLflow run)",
        description="Train query and document towers with the loss of eq. (5) and Nesterov momentum (eq. 6, "
        "mu 0.9/0.995, per-tower gradient re-normalisation) on features/<version>, validate every epoch on the "
        "held-out click pairs, checkpoint to the store, log and register the model in MLflow. "
        "Data-parallel with --nproc N, or run the same command under torchrun.",
    )
    tr.add_argument("--model", required=True, choices=trainable_tower_names(), help="tower type")
    add_tower_flags(tr)
    tr.add_argument("--negatives", type=v.up_to(64), default=NEGATIVES, help=f"random unclicked titles per click (default {NEGATIVES})")
    tr.add_argument("--gamma", type=v.positive_float, default=GAMMA, help=f"smoothing factor of the softmax, eq. (5) (default {GAMMA:g})")
    tr.add_argument("--epochs", type=v.up_to(1000), default=EPOCHS, help=f"maximum epochs (default {EPOCHS}, as in the paper)")
    tr.add_argument("--lr", type=v.positive_float, help="fixed step size epsilon (default chosen on validation pairs)")
    tr.add_argument("--batch-size", type=v.up_to(65_536), help="examples per update (global over all processes)")
    tr.add_argument("--th-g", type=v.positive_float, dest="th_g", help="gradient re-normalisation threshold th_G per tower")
    tr.add_argument("--patience", type=v.up_to(1000), default=PATIENCE,
                    help=f"epochs without validation improvement before stopping (default {PATIENCE})")
    tr.add_argument("--optimizer", choices=("nesterov", "adam"),
                    help="default: the model's (the paper's nesterov; adam for the pretrained minilm)")
    tr.add_argument("--seed", type=v.seed, default=SEED, help=f"seed of the weights and the data order (default {SEED})")
    tr.add_argument("--device", choices=DEVICES, help="default auto: CUDA when present (env DEEPSENT_DEVICE)")
    tr.add_argument("--threads", type=v.up_to(v.CORES, "a thread count"), default=2, help="torch threads per process on CPU (default 2)")
    tr.add_argument("--precision", choices=PRECISIONS, default="fp32",
                    help="fp32 (default; the paper's numbers) or bf16 mixed precision (bfloat16 autocast, float32 weights)")
    tr.add_argument("--nproc", type=v.up_to(max(v.CORES, 8), "a process count"), default=1, help="data-parallel processes on this machine (gloo/NCCL)")
    tr.add_argument("--ddp", action="store_true",
                    help="use the data-parallel engine (DDP; NCCL on CUDA) even with --nproc 1")
    tr.add_argument("--features-version", default="", help="features/<version> to train on (default: latest with n)")
    tr.add_argument("--experiment", default="deepsent", type=v.name_text("an MLflow experiment name"),
                    help="MLflow experiment (default deepsent)")
    tr.add_argument("--resume", action="store_true", help="continue this configuration's run from its last checkpoint")
    tr.set_defaults(handler=run_train)


def add_tower_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per tower setting of the catalog (``--ncell``, ``--forget-gate``, ...); each model takes its own."""
    for key, kind in tower_settings().items():
        owners = models_with(key)
        defaults = sorted({str(towers()[m].defaults[key]) for m in owners})
        where = f"{', '.join(owners)}; default {'/'.join(defaults)}"
        flag = "--" + key.replace("_", "-")
        if kind is bool:
            parser.add_argument(flag, action="store_const", const=True, help=f"turn on {key} ({where})")
        else:  # the catalog's rule (TowerSpec.resolve): integer settings >= 1, float settings > 0
            parser.add_argument(flag, type=v.up_to(4096) if kind is int else v.positive_float,
                                help=f"tower setting {key} ({where})")


def train_config(args: argparse.Namespace) -> Any:
    """The TrainConfig of the parsed flags (unset flags keep the library defaults; ``--device`` goes to the settings)."""
    from encoders.training.trainer import TrainConfig

    tower = {k: getattr(args, k) for k in tower_settings() if getattr(args, k) is not None}
    optional = {"lr": args.lr, "batch_size": args.batch_size, "th_G": args.th_g}
    return TrainConfig(
        model=args.model, tower=tower, negatives=args.negatives, gamma=args.gamma, epochs=args.epochs,
        patience=args.patience, seed=args.seed, threads=args.threads,
        features_version=args.features_version, optimizer=args.optimizer, nproc=args.nproc, resume=args.resume,
        precision=args.precision, ddp=args.ddp,
        experiment=args.experiment, **{k: v for k, v in optional.items() if v is not None},
    )


def run_train(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Train and summarise: run id, registered model, best epoch, validation metrics, throughput."""
    from encoders.training.distributed import under_launcher
    from encoders.training.trainer import train

    result = train(settings.with_overrides(device=args.device), train_config(args))
    if under_launcher() and os.environ.get("RANK", "0") != "0":
        sys.stdout = open(os.devnull, "w")  # under torchrun only rank 0 reports
        return {"summary": ""}
    return result.to_dict()
