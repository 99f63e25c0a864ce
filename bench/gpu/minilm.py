"""The transformer half on a GPU: MiniLM fine-tuned on every training click pair, the ensembles, the dev table.

On a store after ``deepsent featurize`` (the GPU session's scratch store, docs/GPU.md), in one process:

1. the LSTM-RNN of the quick profile (ncell 96, n = 4, 8 epochs), or ``--lstm URI``;
2. MiniLM fine-tuned with eq. (5) on *all* training pairs (in-batch negatives, n = 4) for ``--epochs``;
3. two ensembles fitted on held-out clicks: LSTM-RNN + MiniLM off the shelf (what the main job ships) and
   LSTM-RNN + the fine-tuned MiniLM;
4. ``compare`` on the dev judgments: BM25, MiniLM off the shelf, the fine-tuned MiniLM, both ensembles;
5. the corpus titles/s of each ensemble on the device (every distinct corpus title, after a warm-up).

    python3 -m bench.gpu.minilm --device cuda --epochs 3 --out $OUT/gpu-minilm.json

Writes one JSON object (``--out``, default bench/results/gpu-minilm.json); the model choices are made on
held-out clicks (the ensembles' mix, MiniLM's early stopping), never on the dev set it reports.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench import RESULTS
from pipeline.core.config import Settings

OUT = RESULTS / "gpu-minilm.json"


def titles_per_s(settings: Settings, model_uri: str, device: str, titles: list[str], batch_size: int) -> dict[str, Any]:
    """Titles/s of ``model_uri`` encoding ``titles`` on ``device`` (a warm-up batch first, then all of them once)."""
    import torch

    from encoders.model.loading import load_encoder

    encoder = load_encoder(model_uri, settings, device=device)
    encoder.encode(titles[:batch_size], "doc", batch_size=batch_size)  # warm-up: kernels, allocator, tokeniser
    if device == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    vectors = encoder.encode(titles, "doc", batch_size=batch_size)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    return {"titles": len(titles), "seconds": round(seconds, 2), "titles_per_s": round(len(titles) / seconds, 1),
            "batch_size": batch_size, "dim": int(vectors.shape[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--epochs", type=int, default=3, help="MiniLM epochs (early stopping on held-out clicks)")
    parser.add_argument("--batch-size", type=int, default=128, help="MiniLM training batch")
    parser.add_argument("--lstm", help="an LSTM-RNN model URI (default: train the quick profile's)")
    parser.add_argument("--embed-batch", type=int, default=1024)
    parser.add_argument("--embed-titles", type=int, default=0, help="time this many corpus titles (0: all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from encoders.search.corpus_shards import corpus_texts
    from encoders.training.ensemble_build import build_ensemble
    from eval.decisions.gate_set import decision_set
    from eval.decisions.mix import MixDecider
    from encoders.training.trainer import TrainConfig, train
    from eval.compare import compare
    from pipeline.storage.store import Store
    from pipeline.features.feature_files import latest_version

    settings = Settings.from_env(device=args.device)
    store = Store.from_settings(settings)
    features_version = latest_version(store)
    result: dict[str, Any] = {"benchmark": "gpu_minilm", "device": args.device, "features_version": features_version}
    if args.device == "cuda":
        import torch

        result["gpu"] = torch.cuda.get_device_name(0)
    runs: dict[str, Any] = {}
    if args.lstm is None:
        runs["lstm"] = train(settings, TrainConfig(model="lstm", tower={"ncell": 96}, negatives=4, epochs=8,
                                                   seed=args.seed, features_version=features_version))
    lstm_uri = args.lstm or runs["lstm"].model_uri
    runs["minilm"] = train(settings, TrainConfig(model="minilm", tower={"in_batch": True}, negatives=4,
                                                 epochs=args.epochs, batch_size=args.batch_size, patience=1,
                                                 seed=args.seed, features_version=features_version))
    result["train"] = {name: {"model_uri": run.model_uri, "epochs": len(run.history), "valid_mrr": run.best_metric,
                              "examples_per_s": run.examples_per_s, "seconds": run.seconds, "device": run.device}
                       for name, run in runs.items()}
    decider = MixDecider(decision_set(settings, features_version))  # the gate set (DEEPSENT_GATE_JUDGMENTS)
    shipped = build_ensemble(settings, lstm_uri, features_version, decider, register=False)
    tuned = build_ensemble(settings, lstm_uri, features_version, decider, minilm_uri=runs["minilm"].model_uri,
                           register=False)
    result["ensembles"] = {name: {"model_uri": ens.model_uri, "mix": ens.mix, "score": ens.score,
                                  "part_scores": ens.part_scores, "signal": ens.signal}
                           for name, ens in (("lstm+minilm off the shelf", shipped), ("lstm+minilm fine-tuned", tuned))}
    table = compare(settings, models=[lstm_uri, runs["minilm"].model_uri, shipped.model_uri, tuned.model_uri],
                    baselines=["bm25", "minilm"])
    print(table.table_markdown, flush=True)
    result["dev"] = [{k: row[k] for k in ("name", "ndcg@1", "ndcg@3", "ndcg@10")} for row in table.rows]
    titles = corpus_texts(settings, store)[:args.embed_titles or None]
    result["embed"] = {name: titles_per_s(settings, ens.model_uri, args.device, titles, args.embed_batch)
                       for name, ens in (("lstm+minilm off the shelf", shipped), ("lstm+minilm fine-tuned", tuned))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("train", "embed")}, indent=1), flush=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
