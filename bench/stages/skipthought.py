"""Benchmark: skip-thought training cost on CPU, 1 vs 2 torch threads, adaptive vs full softmax.

Measures on the real books (the first ``--books`` files), default model sizes:

* seconds per training step and triples per second with 1 and with 2 torch threads
  (``--steps`` updates each, after one warm-up step);
* the decoder output layer alone (forward + backward over one batch's target words):
  ``AdaptiveLogSoftmaxWithLoss`` with the configured cutoffs vs a full softmax
  (``Linear`` + cross-entropy) over the same vocabulary.

The load average is recorded: on a shared box the thread ratio reflects contention (which is
why the default is 1 thread), on an idle one the raw speed-up of the second core.
Prints the ratios and writes JSON (default ``bench/results/skipthought.json``).

    .venv/bin/python -m bench.stages.skipthought [--books 3] [--steps 10] [--out PATH]
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench import RESULTS, write_results
from eval.baselines.books import read_corpus
from eval.baselines.skipthought_config import build_vocab, config_for
from eval.baselines.skipthought_net import train
from pipeline.core.config import Settings

DEFAULT_OUT = RESULTS / "skipthought.json"


def training_speed(books: int, steps: int) -> dict[str, Any]:
    """Seconds per step and triples/s of the default config with 1 and 2 threads."""
    corpus = read_corpus(Settings.from_env().books_dir, max_books=books)
    out: dict[str, Any] = {"corpus": corpus.stats}
    for threads in (1, 2):
        cfg = config_for("default", max_steps=steps + 1, threads=threads, max_minutes=30.0)
        meta = train(corpus, cfg)[2]
        out[f"threads_{threads}"] = {
            "seconds_per_step": round(meta["train_seconds"] / meta["steps"], 3),
            "triples_per_second": meta["triples_per_second"],
        }
    return out


def softmax_cost(books: int, repeat: int = 5) -> dict[str, Any]:
    """Forward+backward seconds of the output layer: adaptive vs full softmax, one batch of targets."""
    import torch
    from torch import nn

    cfg = config_for("default")
    corpus = read_corpus(Settings.from_env().books_dir, max_books=books)
    vocab = build_vocab(corpus, cfg.vocab_size)
    index = {w: i for i, w in enumerate(vocab)}
    rng = np.random.default_rng(0)
    rows = rng.choice(len(corpus.sentences), 2 * cfg.batch_size)
    targets = torch.tensor([index.get(t, 2) for r in rows for t in corpus.sentences[r][: cfg.max_len]])
    torch.manual_seed(0)
    hidden = torch.randn(len(targets), cfg.hidden_dim, requires_grad=True)
    adaptive = nn.AdaptiveLogSoftmaxWithLoss(cfg.hidden_dim, len(vocab), list(cfg.cutoffs), head_bias=True)
    full = nn.Linear(cfg.hidden_dim, len(vocab))
    layers = {
        "adaptive": lambda: adaptive(hidden, targets).loss,
        "full": lambda: nn.functional.cross_entropy(full(hidden), targets),
    }
    out: dict[str, Any] = {"target_words": len(targets), "vocab": len(vocab), "cutoffs": list(cfg.cutoffs)}
    torch.set_num_threads(1)
    for name, loss_fn in layers.items():
        loss_fn().backward()
        began = time.perf_counter()
        for _ in range(repeat):
            loss_fn().backward()
        out[f"{name}_seconds"] = round((time.perf_counter() - began) / repeat, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run both measurements, print the ratios, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    result = {
        "config": asdict(config_for("default")),
        "training": training_speed(args.books, args.steps),
        "output_layer": softmax_cost(args.books),
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }
    t1, t2 = result["training"]["threads_1"], result["training"]["threads_2"]
    soft = result["output_layer"]
    print(f"training step, 1 thread: {t1['seconds_per_step']} s ({t1['triples_per_second']} triples/s); "
          f"2 threads: {t2['seconds_per_step']} s; 2 vs 1 thread speed ratio {t1['seconds_per_step'] / t2['seconds_per_step']:.2f}")
    print(f"output layer over {soft['target_words']} words: adaptive {soft['adaptive_seconds']} s, full "
          f"{soft['full_seconds']} s; full / adaptive = {soft['full_seconds'] / soft['adaptive_seconds']:.1f}x")
    print(f"load average before/after: {result['loadavg_1min']}")
    write_results(args.out, result, sort_keys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
