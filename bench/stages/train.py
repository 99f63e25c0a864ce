"""Benchmark: training examples/s and embedding titles/s of every tower, on CPU and on CUDA when present.

A training example is 1 query + its clicked title + n random titles (the paper's eq. 5); one
measured step is the full update of ``deepsent train``: both towers forward, loss, backward,
per-tower re-normalisation, the Nesterov step. Embedding is ``TextEncoder.encode`` of real titles
(text -> trigram ids -> doc tower, no gradient). Sentences come from the real Home Depot
judgments (queries with a judged title and random other titles), hashed with a vocabulary of
the training judgments, at the paper's sizes (LSTM ncell 96, RNN 288, DSSM 288/96, CLSM win 3).

Wall-clock rates depend on what else runs on the machine; the CPU-time rate (examples per
second of this process's CPU time) and the load average are recorded beside them. Targets, LSTM
ncell 96, n = 4: on CPU (2 threads) >= 2,000 training examples/s and >= 20,000 titles/s; on an
H100-class GPU >= 100,000 training examples/s and >= 1,000,000 titles/s. On CUDA each row also
records the GPU utilisation while it ran and its matrix work as a fraction of the card's measured
peak (``bench/gpu/meters.py``); ``--batch-sizes`` and ``--precisions`` (fp32, bf16) add rows.

    .venv/bin/python -m bench.stages.train [--device cpu|cuda] [--threads 2] [--seconds 20] [--models lstm,dssm]
        [--batch-sizes 256,4096] [--precisions fp32,bf16] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from bench import RESULTS
from bench.gpu.meters import Utilisation, device_facts, matmul_flops, peak_matmul_flops
from encoders.model.device import resolve_device
from encoders.towers.batch import PairBatch, SentenceBatch, TextBatch
from encoders.towers.text_batches import texts_to_batch
from encoders.towers.tower_catalog import tower_names, tower_spec
from encoders.towers.twotower import TwoTowerModel
from encoders.training.epoch import update_step
from encoders.training.optim import build_optimizer
from pipeline.core.config import Settings
from pipeline.features.trigram import TrigramVocab
from pipeline.text.homedepot import read_judgments

DEFAULT_OUT = RESULTS / "train.json"
SIZES: dict[str, dict[str, Any]] = {"lstm": {"ncell": 96}, "rnn": {"nhid": 288}, "bilstm": {"ncell": 96},
                                    "dssm": {"nhid": 288, "nout": 96}, "clsm": {"win": 3}, "minilm": {"max_tokens": 32}}
MAX_WORDS = 30


def real_text(settings: Settings) -> tuple[TrigramVocab, list[str], list[str]]:
    """Vocabulary of the training judgments, their distinct queries and distinct titles."""
    judged = read_judgments(settings.train_judgments)
    queries, titles = sorted(set(judged["query"].to_pylist())), sorted(set(judged["title"].to_pylist()))
    vocab = TrigramVocab.build([pa.array(queries + titles)])
    return vocab, queries, titles


def batch_of(texts: list[str], vocab: TrigramVocab, reads_text: bool) -> SentenceBatch | TextBatch:
    """The texts as the tower reads them: word-hashed (trigram towers) or as they are (the transformer)."""
    return TextBatch(texts) if reads_text else texts_to_batch(texts, vocab, MAX_WORDS)


def pair_batches(vocab: TrigramVocab, queries: list[str], titles: list[str], batch_size: int, negatives: int,
                 count: int, reads_text: bool = False, seed: int = 7) -> list[PairBatch]:
    """``count`` batches of (query, title, n random titles) drawn from real text (the same texts either way)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        qs = rng.sample(queries, batch_size)
        docs = [rng.choice(titles) for _ in range(batch_size * (1 + negatives))]
        out.append(PairBatch(batch_of(qs, vocab, reads_text), batch_of(docs, vocab, reads_text), negatives))
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_rate(model: TwoTowerModel, batches: list[PairBatch], device: torch.device, seconds: float,
               precision: str = "fp32") -> dict[str, Any]:
    """Training examples per second (wall and per CPU-second) of the full update step, GPU utilisation
    while it ran, and the matrix FLOPs of one step."""
    optimizer = build_optimizer("nesterov", model.parameters(), lr=0.01, total_steps=10**6)
    batches = [b.to(device) for b in batches]

    def step(batch: PairBatch) -> None:
        update_step(model, model.towers(), optimizer, batch, gamma=10.0, th_g=1.0, loss_scale=1.0 / batch.size,
                    precision=precision)

    for batch in batches[:2]:
        step(batch)
    _sync(device)
    flops = matmul_flops(lambda: step(batches[0]))
    _sync(device)
    examples, wall, cpu = 0, time.perf_counter(), time.process_time()
    with Utilisation(device) as util:
        while time.perf_counter() - wall < seconds or examples == 0:
            for batch in batches:
                step(batch)
                examples += batch.size
                if time.perf_counter() - wall >= seconds:  # a transformer step takes seconds on a CPU
                    break
        _sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    steps = examples / batches[0].size
    return {"train_examples_per_s": examples / wall, "train_examples_per_cpu_s": examples / cpu, "train_steps": steps,
            "matmul_flops_per_step": flops, "matmul_flop_per_s": flops * steps / wall, **util.summary()}


@torch.no_grad()
def embed_rate(model: TwoTowerModel, vocab: TrigramVocab, titles: list[str], device: torch.device,
               batch_size: int, seconds: float) -> dict[str, float]:
    """Titles embedded per second: with text hashing (as ``TextEncoder.encode``), and on titles already
    hashed into batches (the tower alone: what a feature-based job gets, and the device's ceiling)."""
    model.eval()
    reads_text = tower_spec(model.model_type).inputs == "text"
    model.embed(batch_of(titles[:batch_size], vocab, reads_text).to(device), "doc")
    _sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(titles), batch_size):
        model.embed(batch_of(titles[start : start + batch_size], vocab, reads_text).to(device), "doc")
    _sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    hashed = [batch_of(titles[start : start + batch_size], vocab, reads_text).to(device)
              for start in range(0, len(titles) - batch_size + 1, batch_size)] or [batch_of(titles, vocab, reads_text).to(device)]
    count, began = 0, time.perf_counter()
    with Utilisation(device) as util:
        while time.perf_counter() - began < seconds or count == 0:
            for batch in hashed:
                model.embed(batch, "doc")
                count += batch.num_sentences
        _sync(device)
    hashed_rate = count / (time.perf_counter() - began)
    model.train()
    return {"embed_titles_per_s": len(titles) / wall, "embed_titles_per_cpu_s": len(titles) / cpu,
            "embed_hashed_titles_per_s": hashed_rate, "embed_gpu_util_mean": util.summary()["gpu_util_mean"]}


def measure(name: str, vocab: TrigramVocab, batches: list[PairBatch], titles: list[str], device: torch.device,
            precision: str, args: argparse.Namespace, peaks: dict[str, float]) -> dict[str, Any]:
    """One row: a freshly seeded model of ``name`` trained and embedding on ``device`` in ``precision``."""
    torch.manual_seed(0)
    model = TwoTowerModel(name, vocab.size, SIZES[name]).to(device)
    row = {"model": name, "name": model.name, "device": str(device), "precision": precision,
           "batch_size": batches[0].size, "threads": args.threads,
           "params_per_tower": model.param_counts()["query"], "params_total": model.param_counts()["total"],
           **train_rate(model, batches, device, args.seconds, precision),
           **embed_rate(model, vocab, titles, device, args.embed_batch, args.seconds),
           "load_average_1m": os.getloadavg()[0]}
    if precision in peaks:
        row["matmul_fraction_of_peak"] = row["matmul_flop_per_s"] / peaks[precision]
    util = f"  GPU {row['gpu_util_mean']:.0f}%" if row.get("gpu_util_mean") is not None else ""
    print(f"{row['name']:<34} {row['device']:<6} {precision} batch {row['batch_size']:>5}  train "
          f"{row['train_examples_per_s']:>9,.0f} ex/s ({row['train_examples_per_cpu_s']:>8,.0f} per CPU-s){util}  "
          f"embed {row['embed_titles_per_s']:>9,.0f} titles/s, hashed {row['embed_hashed_titles_per_s']:>11,.0f}  "
          f"load {row['load_average_1m']:.1f}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu (default; writes results/train.json) or cuda (writes results/train-cuda.json)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time measured per row (training, then embedding)")
    parser.add_argument("--batch-sizes", default="256", help="comma-separated examples per update (default 256)")
    parser.add_argument("--precisions", default="fp32", help="comma-separated subset of fp32,bf16 (default fp32)")
    parser.add_argument("--negatives", type=int, default=4)
    parser.add_argument("--embed-titles", type=int, default=20_000, help="titles embedded per measurement")
    parser.add_argument("--embed-batch", type=int, default=1024)
    parser.add_argument("--models", default=",".join(tower_names("trigrams")),
                        help=f"comma-separated subset of {','.join(tower_names())} (default: every trigram tower)")
    parser.add_argument("--out", type=Path, help="JSON path (default results/train.json or results/train-cuda.json)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows already in the JSON file that this run does not measure again")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    settings = Settings.from_env()
    vocab, queries, titles = real_text(settings)
    embed_titles = random.Random(3).sample(titles, min(args.embed_titles, len(titles)))
    precisions = args.precisions.split(",")
    peaks = ({p: peak_matmul_flops(device, torch.bfloat16 if p == "bf16" else torch.float32) for p in precisions}
             if device.type == "cuda" else {})
    rows = []
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        for name in args.models.split(","):
            reads_text = tower_spec(name).inputs == "text"
            batches = pair_batches(vocab, queries, titles, batch_size, args.negatives,
                                   count=max(2, 2048 // batch_size), reads_text=reads_text)
            for precision in precisions:
                rows.append(measure(name, vocab, batches, embed_titles, device, precision, args, peaks))
    lstm = [r for r in rows if r["model"] == "lstm" and r["device"] == "cpu" and r["batch_size"] == 256]
    if lstm:
        r = lstm[0]
        print(f"LSTM ncell 96 on CPU vs target: training {r['train_examples_per_s'] / 2000:.2f}x of 2,000 ex/s, "
              f"embedding {r['embed_titles_per_s'] / 20000:.2f}x of 20,000 titles/s")
    result = {"benchmark": "train", "vocab_size": vocab.size, "negatives": args.negatives, "cpu_count": os.cpu_count(),
              "torch": torch.__version__, **device_facts(device),
              "peak_matmul_flop_per_s": peaks, "rows": rows}
    out = args.out or DEFAULT_OUT.with_name("train-cuda.json" if device.type == "cuda" else "train.json")
    if args.merge and out.exists():
        key = lambda r: (r["model"], r["device"], r.get("precision", "fp32"), r.get("batch_size"))  # noqa: E731
        measured = {key(r) for r in rows}
        old = json.loads(out.read_text())
        kept = [{"precision": "fp32", "batch_size": old.get("batch_size"), **r} for r in old["rows"]]
        rows[:0] = [r for r in kept if key(r) not in measured]
        result["rows"] = rows
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
