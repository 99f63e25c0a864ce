"""Benchmark: memory of the vector store's write path as the corpus grows (chunked calls vs one call).

Every title's vector is encoded once and stored in ``vectors/<key>/`` (``encoders.model.vector_store.StoredEncoder``),
whoever asks first: the chain's encode stage, ``deepsent index`` or ``deepsent embed``. This benchmark stores the
vectors of a corpus of N and of 4N distinct titles (real Home Depot titles, numbered to make more of them) of an
LSTM ncell 96 tower in a fresh local store, each size in a fresh process, and records the peak resident memory
above the memory held before encoding starts (model and texts loaded):

- ``streamed``: ``deepsent embed``'s path, ``CHUNK_ROWS`` titles per call to the store
  (``encoders.search.embed.stored_vectors``), each call's vectors one stored part;
- ``all_at_once``: one call for the whole corpus, one part (the encode stage's path in process).

Results (peak growth in MiB, and the 4N / N ratio of each) go to ``bench/results/embed_memory.json``.

    .venv/bin/python -m bench.stages.embed_memory [--titles 50000] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from bench import RESULTS, write_results
DEFAULT_OUT = RESULTS / "embed_memory.json"
MIB = 2**20


class PeakRss:
    """Samples this process's resident memory every few milliseconds; ``peak`` is the largest seen."""

    def __init__(self, interval: float = 0.005) -> None:
        self.process, self.interval, self.peak, self._stop = psutil.Process(), interval, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def measure(titles_wanted: int, mode: str) -> dict[str, Any]:
    """In this process: store the vectors of ``titles_wanted`` titles the ``mode`` way; memory and time."""
    import pyarrow as pa
    import torch

    from encoders.model.text_encoder import TextEncoder
    from encoders.model.vector_store import StoredEncoder
    from encoders.search.embed import stored_vectors
    from encoders.towers.twotower import TwoTowerModel
    from pipeline.core.config import Settings
    from pipeline.text.homedepot import read_judgments
    from pipeline.storage.store import Store
    from pipeline.text.textnorm import normalize
    from pipeline.features.trigram import TrigramVocab

    torch.set_num_threads(2)
    settings = Settings.from_env()
    real = sorted({normalize(t) for t in read_judgments(settings.train_judgments)["title"].to_pylist()})
    vocab = TrigramVocab.build([pa.array(real)])
    torch.manual_seed(0)
    model = TwoTowerModel("lstm", vocab.size, {"ncell": 96})
    encoder = StoredEncoder(TextEncoder(model, vocab, None, "bench", "bench", torch.device("cpu")),
                            Store(tempfile.mkdtemp(prefix="deepsent-embed-bench-")))
    texts = [f"{real[i % len(real)]} {i // len(real)}" for i in range(titles_wanted)]
    before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    with PeakRss() as peak:
        if mode == "streamed":
            stored_vectors(encoder, "title", texts, "doc", {})
        else:
            encoder.encode(texts, "doc")
    seconds = time.perf_counter() - started
    parts = len(encoder.store.list_files("vectors", ".parquet"))
    shutil.rmtree(encoder.store.root, ignore_errors=True)
    return {"mode": mode, "titles": titles_wanted, "rss_before_mib": before / MIB,
            "peak_growth_mib": (peak.peak - before) / MIB, "vector_mib": titles_wanted * encoder.dim * 4 / MIB,
            "parts": parts,
            "seconds": seconds, "titles_per_s": titles_wanted / seconds}


def main() -> None:
    """Each mode at N and 4N titles, each in a fresh process; the JSON written."""
    from encoders.search.embed import CHUNK_ROWS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--titles", type=int, default=50_000, help="N: the small corpus (the large one is 4N)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--child", nargs=2, metavar=("TITLES", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(int(args.child[0]), args.child[1])))
        return
    rows = []
    for mode in ("streamed", "all_at_once"):
        for titles in (args.titles, 4 * args.titles):
            out = subprocess.run([sys.executable, "-m", __spec__.name, "--child", str(titles), mode], check=True,
                                 capture_output=True, text=True, cwd=RESULTS.parents[1]).stdout
            row = json.loads(out.strip().splitlines()[-1])
            rows.append(row)
            print(f"{mode:<12} {titles:>8,} titles: peak +{row['peak_growth_mib']:7.1f} MiB "
                  f"(vectors {row['vector_mib']:6.1f} MiB), {row['titles_per_s']:8,.0f} titles/s", flush=True)
    growth = {r["mode"]: {} for r in rows}
    for r in rows:
        growth[r["mode"]][r["titles"]] = r["peak_growth_mib"]
    ratios = {mode: by_size[4 * args.titles] / by_size[args.titles] for mode, by_size in growth.items()}
    print("peak growth 4N / N: " + ", ".join(f"{mode} {ratio:.2f}x" for mode, ratio in ratios.items()))
    result = {"benchmark": "embed_memory", "model": "lstm ncell 96", "chunk_rows": CHUNK_ROWS, "rows": rows,
              "growth_ratio_4n_over_n": ratios}
    write_results(args.out, result)


if __name__ == "__main__":
    main()
