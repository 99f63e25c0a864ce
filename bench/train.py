"""Benchmark: training examples/s and embedding titles/s of every tower, on CPU and on CUDA when present.

A training example is 1 query + its clicked title + n random titles (the paper's eq. 5); one
measured step is the full update of ``deepsent train``: both towers forward, loss, backward,
per-tower re-normalisation, the Nesterov step. Embedding is ``TextEncoder.encode`` of real titles
(text -> trigram ids -> doc tower, no gradient). Sentences come from the real Home Depot
judgments (queries with a judged title and random other titles), hashed with a vocabulary of
the training judgments, at the paper's sizes (LSTM ncell 96, RNN 288, DSSM 288/96, CLSM win 3).

Wall-clock rates depend on what else runs on the machine; the CPU-time rate (examples per
second of this process's CPU time) and the load average are recorded beside them. Target on
CPU (2 threads), LSTM ncell 96, n = 4: >= 2,000 training examples/s, >= 20,000 titles/s.

    .venv/bin/python bench/train.py [--threads 2] [--seconds 20] [--models lstm,dssm] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from encoders.batch import PairBatch  # noqa: E402
from encoders.data import texts_to_batch  # noqa: E402
from encoders.optim import build_optimizer  # noqa: E402
from encoders.catalog import tower_names  # noqa: E402
from encoders.trainer import update_step  # noqa: E402
from encoders.twotower import TwoTowerModel  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.homedepot import read_judgments  # noqa: E402
from pipeline.trigram import TrigramVocab  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "train.json"
SIZES: dict[str, dict[str, Any]] = {"lstm": {"ncell": 96}, "rnn": {"nhid": 288}, "bilstm": {"ncell": 96},
                                    "dssm": {"nhid": 288, "nout": 96}, "clsm": {"win": 3}}
MAX_WORDS = 30


def real_text(settings: Settings) -> tuple[TrigramVocab, list[str], list[str]]:
    """Vocabulary of the training judgments, their distinct queries and distinct titles."""
    judged = read_judgments(settings.train_judgments)
    queries, titles = sorted(set(judged["query"].to_pylist())), sorted(set(judged["title"].to_pylist()))
    vocab = TrigramVocab.build([pa.array(queries + titles)])
    return vocab, queries, titles


def pair_batches(vocab: TrigramVocab, queries: list[str], titles: list[str], batch_size: int, negatives: int,
                 count: int, seed: int = 7) -> list[PairBatch]:
    """``count`` batches of (query, title, n random titles) drawn from real text."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        qs = rng.sample(queries, batch_size)
        docs = [rng.choice(titles) for _ in range(batch_size * (1 + negatives))]
        out.append(PairBatch(texts_to_batch(qs, vocab, MAX_WORDS), texts_to_batch(docs, vocab, MAX_WORDS), negatives))
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_rate(model: TwoTowerModel, batches: list[PairBatch], device: torch.device, seconds: float) -> dict[str, float]:
    """Training examples per second (wall and per CPU-second) of the full update step."""
    optimizer = build_optimizer("nesterov", model.parameters(), lr=0.01, total_steps=10**6)
    batches = [b.to(device) for b in batches]

    def step(batch: PairBatch) -> None:
        update_step(model, model.towers(), optimizer, batch, gamma=10.0, th_g=1.0, loss_scale=1.0 / batch.size)

    for batch in batches[:2]:
        step(batch)
    _sync(device)
    examples, wall, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < seconds or examples == 0:
        for batch in batches:
            step(batch)
            examples += batch.size
    _sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"train_examples_per_s": examples / wall, "train_examples_per_cpu_s": examples / cpu, "train_steps": examples / batches[0].size}


@torch.no_grad()
def embed_rate(model: TwoTowerModel, vocab: TrigramVocab, titles: list[str], device: torch.device,
               batch_size: int) -> dict[str, float]:
    """Titles embedded per second, text hashing included (as ``TextEncoder.encode``)."""
    model.eval()
    model.embed(texts_to_batch(titles[:batch_size], vocab, MAX_WORDS).to(device), "doc")
    _sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(titles), batch_size):
        model.embed(texts_to_batch(titles[start : start + batch_size], vocab, MAX_WORDS).to(device), "doc")
    _sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"embed_titles_per_s": len(titles) / wall, "embed_titles_per_cpu_s": len(titles) / cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--seconds", type=float, default=20.0, help="training time measured per tower and device")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--negatives", type=int, default=4)
    parser.add_argument("--embed-titles", type=int, default=20_000, help="titles embedded per measurement")
    parser.add_argument("--embed-batch", type=int, default=1024)
    parser.add_argument("--models", default=",".join(SIZES), help=f"comma-separated subset of {','.join(tower_names())}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    settings = Settings.from_env()
    vocab, queries, titles = real_text(settings)
    batches = pair_batches(vocab, queries, titles, args.batch_size, args.negatives, count=8)
    embed_titles = random.Random(3).sample(titles, min(args.embed_titles, len(titles)))
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rows = []
    for name in args.models.split(","):
        for device in devices:
            torch.manual_seed(0)
            model = TwoTowerModel(name, vocab.size, SIZES[name]).to(device)
            row = {"model": name, "name": model.name, "device": str(device), "threads": args.threads,
                   "params_per_tower": model.param_counts()["query"], "params_total": model.param_counts()["total"],
                   **train_rate(model, batches, device, args.seconds),
                   **embed_rate(model, vocab, embed_titles, device, args.embed_batch),
                   "load_average_1m": os.getloadavg()[0]}
            rows.append(row)
            print(f"{row['name']:<34} {row['device']:<5} params/tower {row['params_per_tower']:>11,}  train "
                  f"{row['train_examples_per_s']:>8,.0f} ex/s ({row['train_examples_per_cpu_s']:>7,.0f} per CPU-s)  embed "
                  f"{row['embed_titles_per_s']:>9,.0f} titles/s ({row['embed_titles_per_cpu_s']:>8,.0f} per CPU-s)  "
                  f"load {row['load_average_1m']:.1f}", flush=True)
    lstm = [r for r in rows if r["model"] == "lstm" and r["device"] == "cpu"]
    if lstm:
        r = lstm[0]
        print(f"LSTM ncell 96 on CPU vs target: training {r['train_examples_per_s'] / 2000:.2f}x of 2,000 ex/s, "
              f"embedding {r['embed_titles_per_s'] / 20000:.2f}x of 20,000 titles/s")
    result = {"benchmark": "train", "vocab_size": vocab.size, "batch_size": args.batch_size, "negatives": args.negatives,
              "cpu_count": os.cpu_count(), "torch": torch.__version__, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
