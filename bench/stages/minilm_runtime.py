"""Benchmark: where MiniLM's CPU time goes, side by side in one run, with parity.

The shipped ensemble spends nearly all of its encoding time in its MiniLM half (all-MiniLM-L6-v2, mean-pooled).
This runs the same half through well-kept runtimes and measures each, one after the other in one process:

- ``torch``: the tower as it ships (sentence-transformers' modules on torch, fp32) — the reference;
- ``torch-int8``: torch's dynamic int8 quantisation of its Linear layers;
- ``onnxruntime``: the transformer and its mean pooling exported to ONNX (``torch.onnx.export``), fp32;
- ``onnxruntime-int8``: that graph quantised by ``onnxruntime.quantization.quantize_dynamic``;
- ``openvino``: the transformer and its pooling converted and compiled by OpenVINO for the CPU at fp32 precision
  (``encoders.towers.minilm_runtime.CompiledMiniLM``: what ``deepsent`` now runs; the reference runs with
  ``DEEPSENT_MINILM_RUNTIME=torch``).

Every runtime tokenises with the tower's own tokenizer. Per runtime: titles/s on a seeded sample of corpus titles
(batches of like-length texts, as ``deepsent`` encodes them), timed in interleaved rounds (every runtime once per
round: the VM's speed drifts over minutes, so only same-round ratios compare), the cosine of its vectors to torch's, the dev table's
MiniLM row (NDCG@1/3/10 of MiniLM off the shelf, read at the packaged model's own length) and the served figures
(``compare --retrieval``'s rows of the champion ensemble with its MiniLM half run by the runtime, over the whole
corpus). Parity: every figure within 0.1 point (0.001) of torch's. The exported graphs live in a temporary folder.

    DEEPSENT_STORE=... .venv/bin/python -m bench.stages.minilm_runtime --model-uri models:/deepsent-ranker/1 \\
        [--sample 3000] [--out bench/results/minilm-runtime.json]

ONNX Runtime and the ONNX exporter are needed here only, not by ``deepsent`` (its ``minilm`` extra brings OpenVINO):
``.venv/bin/pip install onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from bench import RESULTS
from encoders.search.vectors import unit
from encoders.towers.batch import TextBatch
from encoders.towers.minilm import MiniLMTower, packaged_max_tokens
from encoders.towers.minilm_runtime import ENV, CompiledMiniLM, MeanPooled
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED

DEFAULT_OUT = RESULTS / "minilm-runtime.json"
RUNTIMES = ("torch", "torch-int8", "onnxruntime", "onnxruntime-int8", "openvino")
BATCH = 128
PARITY = 0.001  # 0.1 point of a metric in [0, 1]
#: What each runtime's stored vectors are told apart by (8 characters after the torch half's key).
KEY_TAGS = {"torch-int8": "torch-in", "onnxruntime": "onnxrunt", "onnxruntime-int8": "ort-int8", "openvino": "openvino"}
ONNX_INSTALL = ".venv/bin/pip install onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2"


def onnx_runtime() -> Any:
    """ONNX Runtime (with its quantiser and the ONNX exporter's ``onnx``): the onnxruntime rows only, not a
    dependency of deepsent; without it, one line naming the install and exit 2."""
    try:
        import onnx  # noqa: F401 - torch.onnx.export needs it
        import onnxruntime
        import onnxruntime.quantization
    except ImportError as error:
        print(f"deepsent: error: the onnxruntime rows need ONNX Runtime ({error.name} is missing): {ONNX_INSTALL}, "
              "or leave them out of --runtimes", file=sys.stderr)
        raise SystemExit(2) from error
    return onnxruntime


def export_onnx(tower: MiniLMTower, folder: Path) -> Path:
    """The tower's transformer and pooling as ``folder/minilm.onnx`` (dynamic batch and length)."""
    path = folder / "minilm.onnx"
    sample = {k: v for k, v in tower.transformer.preprocess(["a cordless drill", "tile"]).items() if torch.is_tensor(v)}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"vector": {0: "batch"}}
    torch.onnx.export(MeanPooled(tower.transformer.auto_model).eval(), tuple(sample[n] for n in names), str(path),
                      input_names=names, output_names=["vector"], dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


def runtime_fn(name: str, tower: MiniLMTower, folder: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """A function from tokenised inputs (numpy int64) to mean-pooled vectors, run by runtime ``name``."""
    threads = torch.get_num_threads()
    if name.startswith("torch"):
        model = MeanPooled(tower.transformer.auto_model).eval()
        if name == "torch-int8":
            model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)

        @torch.no_grad()
        def run(inputs: dict[str, np.ndarray]) -> np.ndarray:
            return model(**{k: torch.from_numpy(v) for k, v in inputs.items()}).numpy()
        return run
    if name == "openvino":
        compiled = CompiledMiniLM(tower.transformer.auto_model)
        return lambda inputs: compiled({k: torch.from_numpy(v) for k, v in inputs.items()}).numpy()
    onnx_path, ort = folder / "minilm.onnx", onnx_runtime()
    if name == "onnxruntime-int8":
        quantized = folder / "minilm-int8.onnx"
        if not quantized.exists():
            ort.quantization.quantize_dynamic(str(onnx_path), str(quantized), weight_type=ort.quantization.QuantType.QInt8)
        onnx_path = quantized
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(["vector"], inputs)[0]


class RuntimeTower(nn.Module):
    """The MiniLM half run by another runtime: reads texts (a ``TextBatch``), gives its vectors; its stored vectors
    get a key of their own (the torch half's key and the runtime's name)."""

    def __init__(self, tower: MiniLMTower, run: Callable[[dict[str, np.ndarray]], np.ndarray], name: str,
                 key: str) -> None:
        super().__init__()
        self.tower, self.run, self.out_dim = tower, run, tower.out_dim
        self.config = getattr(tower, "config", {})
        self.token_counts = tower.token_counts  # its batches are shaped as the tower's own
        self._deepsent_part_key = f"{key[:15]}-{KEY_TAGS[name]}"

    def forward(self, batch: TextBatch) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.run(tokenised(self.tower, batch.texts)), dtype=np.float32))


def tokenised(tower: MiniLMTower, texts: list[str]) -> dict[str, np.ndarray]:
    """The tower's tokenizer output for ``texts`` as int64 numpy arrays."""
    features = tower.transformer.preprocess(texts)
    return {k: features[k].numpy().astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}


def encode_all(run: Callable, tower: MiniLMTower, texts: list[str]) -> tuple[np.ndarray, float]:
    """Vectors of ``texts`` in batches of like-length texts, and the seconds it took."""
    out = np.empty((len(texts), tower.out_dim), dtype=np.float32)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    began = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        rows = order[start:start + BATCH]
        out[rows] = run(tokenised(tower, [texts[i] for i in rows]))
    return out, time.perf_counter() - began


def timing_rounds(runs: dict[str, Callable], tower: MiniLMTower, sample: list[str], rounds: int) -> dict[str, Any]:
    """Per runtime: the median titles/s over ``rounds`` rounds (each runtime once per round, after a warm-up), its
    speed-up as the median of its per-round ratio to torch's, and every round's titles/s."""
    for run in runs.values():
        encode_all(run, tower, sample[:BATCH])
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            rates[name].append(len(sample) / encode_all(run, tower, sample)[1])
    return {name: {"titles_per_s": round(float(np.median(r)), 1), "rounds_titles_per_s": [round(x, 1) for x in r],
                   "speedup": round(float(np.median(np.array(r) / np.array(rates["torch"]))), 2)}
            for name, r in rates.items()}


def dev_minilm_row(run: Callable, tower: MiniLMTower, judged: Any) -> dict[str, float]:
    """NDCG@1/3/10 of MiniLM off the shelf on the judged set, encoded by ``run`` (the compare table's MiniLM row)."""
    from encoders.search.vectors import cosine_pair_scores
    from eval.metrics import KS, ndcg

    def encode(texts: list[str], side: str) -> np.ndarray:
        return encode_all(run, tower, texts)[0]

    result = ndcg(judged, cosine_pair_scores(encode, judged.query, judged.title))
    return {f"ndcg@{k}": round(float(result.mean(k)), 5) for k in KS}


def served_figures(settings: Settings, model_uri: str, name: str, run: Callable) -> dict[str, Any]:
    """The retrieval table's rows of the champion with its MiniLM half run by ``run`` (torch: as it ships)."""
    from encoders.model.loading import load_encoder
    from encoders.model.text_encoder import part_key
    from eval.model_scorer import ModelScorer
    from eval.retrieval.compare import retrieval_compare

    def loader(uri: str, settings: Settings) -> Any:
        encoder = load_encoder(uri, settings)
        if name != "torch":
            for side in ("query", "doc"):
                ensemble = encoder.tower(side)
                half = ensemble.text_part
                if not isinstance(half, RuntimeTower):
                    key = part_key(encoder.parts(side)[1], encoder)
                    ensemble.text_part = RuntimeTower(half, run, name, key)
        return encoder

    began = time.perf_counter()
    result = retrieval_compare(settings, models=[model_uri], baselines=["bm25"],
                               model_scorer=lambda uri: ModelScorer(uri, loader), report_name=f"minilm-runtime-{name}")
    from eval.retrieval.metrics import metric_names

    rows = {row["mode"]: {m: round(float(row[m]), 5) for m in metric_names()} for row in result.rows
            if row["kind"] == "model"}
    return {"rows": rows, "seconds": round(time.perf_counter() - began, 1)}


def max_gap(figures: dict[str, Any], reference: dict[str, Any]) -> float:
    """The largest absolute difference between two nests of figures with the same keys."""
    if isinstance(reference, dict):
        return max((max_gap(figures[k], v) for k, v in reference.items()), default=0.0)
    return abs(float(figures) - float(reference))


def main() -> None:
    """Measure every runtime, print the side-by-side table and write the JSON."""
    from pipeline.ingest.catalog.corpus import corpus_titles
    from eval.judgments import load_judged_set
    from pipeline.storage.store import Store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-uri", required=True, help="the shipped ensemble whose MiniLM half is measured")
    parser.add_argument("--sample", type=int, default=2000, help="corpus titles timed per runtime and round")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds, each runtime once per round")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated subset of " + ", ".join(RUNTIMES))
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON output path")
    args = parser.parse_args()
    names = list(dict.fromkeys(["torch", *args.runtimes.split(",")]))  # torch first: the reference
    onnx_rows = any(name.startswith("onnxruntime") for name in names)
    if onnx_rows:
        onnx_runtime()  # before minutes of work: a missing ONNX Runtime is one line
    settings = Settings.from_env()
    store = Store.from_settings(settings)
    titles = sorted({title for _, title in corpus_titles(settings, store)[0]})
    sample = [titles[i] for i in np.random.default_rng(SEED).permutation(len(titles))[:args.sample]]
    os.environ[ENV] = "torch"  # the reference is torch; every other runtime is run explicitly here
    tower = MiniLMTower(0, packaged_max_tokens(), False, False)  # the packaged length: the ensemble's and the baseline's
    judged = load_judged_set(settings.dev_judgments)
    report: dict[str, Any] = {"model_uri": args.model_uri, "sample_titles": len(sample), "threads": torch.get_num_threads(),
                              "batch": BATCH, "parity_within": PARITY, "runtimes": {}}
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        if onnx_rows:
            export_onnx(tower, folder)
        runs = {name: runtime_fn(name, tower, folder) for name in names}
        timed = timing_rounds(runs, tower, sample, args.rounds)  # interleaved: the VM's speed drifts over minutes
        report["rounds"] = args.rounds
        reference: dict[str, Any] = {}
        for name, run in runs.items():
            vectors = encode_all(run, tower, sample)[0]
            entry: dict[str, Any] = timed[name]
            if name == "torch":
                reference = {"vectors": unit(vectors)}
            cosine = np.einsum("ij,ij->i", unit(vectors), reference["vectors"])
            entry["cosine_to_torch"] = {"mean": round(float(cosine.mean()), 6), "min": round(float(cosine.min()), 6)}
            entry["dev_minilm_row"] = dev_minilm_row(run, tower, judged)
            entry["served"] = served_figures(settings, args.model_uri, name, run)
            if name == "torch":
                reference.update(dev=entry["dev_minilm_row"], served=entry["served"]["rows"])
            entry["max_gap"] = {"dev": round(max_gap(entry["dev_minilm_row"], reference["dev"]), 5),
                                "served": round(max_gap(entry["served"]["rows"], reference["served"]), 5)}
            entry["parity"] = max(entry["max_gap"].values()) <= PARITY
            report["runtimes"][name] = entry
            print(f"{name}: {entry['titles_per_s']} titles/s ({entry['speedup']}x), cosine mean "
                  f"{entry['cosine_to_torch']['mean']}, gaps {entry['max_gap']}, parity {entry['parity']}", flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
