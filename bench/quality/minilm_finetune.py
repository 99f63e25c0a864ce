"""Fine-tune the MiniLM tower on a subset of a store's click pairs for one epoch, then score the dev set.

What it measures: whether one epoch of fine-tuning all-MiniLM-L6-v2 on the team's clicks (eq. 5, in-batch
negatives) moves dev NDCG@1/3/10 away from the off-the-shelf model, and what the negative source does to
the transformer. On 2 CPU cores a MiniLM update costs ~30 texts/s (forward and backward), so a whole epoch
of the quick profile's 22,148 pairs takes hours; the probe trains on the ``--pairs`` training pairs with the
highest smoothed click-through rate (clicks + 1) / (impressions + 10), the pairs whose click is most
likely a real preference. The validation pairs and the skipped titles are the source store's, unchanged.

    .venv/bin/python -m bench.quality.minilm_finetune --source .deepsent --pairs 6000 --negative-source random

Writes a scratch store under ``--work`` and appends one row to ``bench/results/minilm_finetune.json``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import RESULTS
from pipeline.core.config import Settings
from pipeline.core.defaults import NEGATIVE_SOURCES

OUT = RESULTS / "minilm_finetune.json"


def top_ctr_pairs(table: pa.Table, count: int) -> pa.Table:
    """The ``count`` pairs with the highest smoothed click-through rate, in their original order."""
    ctr = (np.asarray(table["clicks"]) + 1.0) / (np.asarray(table["impressions"]) + 10.0)
    return table.take(pa.array(np.sort(np.argsort(-ctr, kind="stable")[:count])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="a store after `deepsent pairs` (e.g. .deepsent)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/deepsent-minilm-probe"))
    parser.add_argument("--pairs", type=int, default=6000)
    parser.add_argument("--negatives", type=int, default=1)
    parser.add_argument("--negative-source", choices=NEGATIVE_SOURCES, default="random")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from encoders.training.trainer import TrainConfig, train
    from eval.compare import compare
    from pipeline.features.featurize import featurize

    root = args.work / f"{args.negative_source}-{args.pairs}-n{args.negatives}-s{args.seed}"
    shutil.rmtree(root, ignore_errors=True)
    for folder in ("pairs", "skipped"):
        shutil.copytree(args.source / folder, root / folder)
    pq.write_table(top_ctr_pairs(pq.read_table(root / "pairs" / "train.parquet"), args.pairs),
                   root / "pairs" / "train.parquet")
    settings = Settings.from_env(store=str(root))
    started = time.perf_counter()
    feats = featurize(settings, negatives=args.negatives, seed=args.seed, negative_source=args.negative_source)
    run = train(settings, TrainConfig(model="minilm", tower={"in_batch": True}, negatives=args.negatives, epochs=1,
                                      batch_size=args.batch_size, patience=1, seed=args.seed,
                                      features_version=feats.version))
    train_seconds = time.perf_counter() - started
    table = compare(settings, models=[run.model_uri], baselines=["bm25", "minilm"])
    print(table.table_markdown)
    row = {"pairs": args.pairs, "negatives": args.negatives, "negative_source": args.negative_source,
           "batch_size": args.batch_size, "seed": args.seed, "train_seconds": round(train_seconds, 1),
           "examples_per_s": run.examples_per_s, "valid_mrr": run.best_metric,
           "dev": {row["name"]: {k: row[k] for k in ("ndcg@1", "ndcg@3", "ndcg@10")} for row in table.rows}}
    rows = json.loads(OUT.read_text())["rows"] if OUT.exists() else []
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"benchmark": "minilm_finetune", "rows": rows + [row]}, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
