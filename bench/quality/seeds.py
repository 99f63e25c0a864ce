"""The headline rows of the quick profile over several seeds: mean and spread of dev NDCG@1/3/10.

One simulated click log (seed 7, the quick profile's 30 days); per seed S: features cut with seed S
(random negatives for training, skipped ones for the click lists that fit the ensemble's mix), the
LSTM-RNN (ncell 96, n = 4, 8 epochs) trained with seed S, the ensemble LSTM-RNN + MiniLM built on it,
and one comparison on the dev set with BM25, ULM, PLSA (T = 100, the reference), MiniLM off the shelf
and the BM25 fusions of the LSTM-RNN (linear, rrf). Writes ``bench/results/seeds.json`` and prints a
Markdown table of mean ± sample standard deviation over the seeds.

    DEEPSENT_STORE=/tmp/seeds .venv/bin/python -m bench.quality.seeds --seeds 7,8,9
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path

from bench import RESULTS
from deepsent.profiles import PROFILES
from pipeline.core.config import Settings

KS = (1, 3, 10)
BASELINES = ["bm25", "ulm", "plsa:topics=100", "minilm", "linear", "rrf"]
OUT = RESULTS / "seeds.json"


def one_seed(settings: Settings, seed: int) -> dict[str, dict[str, float]]:
    """Features, LSTM-RNN, ensemble and the dev comparison for one seed: row name -> ndcg@k."""
    from encoders.training.ensemble_build import build_ensemble
    from encoders.training.trainer import TrainConfig, train
    from eval.compare import compare
    from pipeline.features.featurize import featurize

    spec = next(m for m in PROFILES["quick"].models if m.model == "lstm")
    lists = featurize(settings, negatives=4, seed=seed, negative_source="skipped")
    feats = featurize(settings, negatives=spec.negatives, seed=seed)
    lstm = train(settings, TrainConfig(model="lstm", tower=dict(spec.tower), negatives=spec.negatives,
                                       epochs=spec.epochs, patience=PROFILES["quick"].patience, seed=seed,
                                       features_version=feats.version))
    ensemble = build_ensemble(settings, lstm.model_uri, lists.version)
    table = compare(settings, models=[lstm.model_uri, ensemble.model_uri], baselines=BASELINES,
                    report_name=f"seeds-{seed}")
    rows = {row["name"]: {f"ndcg@{k}": row[f"ndcg@{k}"] for k in KS} for row in table.rows}
    rows["_ensemble"] = {"mix": ensemble.mix, "click_mrr": ensemble.click_mrr, **ensemble.part_mrr}
    return rows


def summarise(per_seed: dict[int, dict[str, dict[str, float]]]) -> dict[str, dict[str, list[float]]]:
    """Row name -> ndcg@k -> [mean, sample std, min, max] over the seeds (rows present in every seed)."""
    names = [n for n in next(iter(per_seed.values())) if not n.startswith("_")
             and all(n in rows for rows in per_seed.values())]
    out: dict[str, dict[str, list[float]]] = {}
    for name in names:
        out[name] = {}
        for k in KS:
            values = [rows[name][f"ndcg@{k}"] for rows in per_seed.values()]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            out[name][f"ndcg@{k}"] = [statistics.mean(values), spread, min(values), max(values)]
    return out


def markdown(summary: dict[str, dict[str, list[float]]], seeds: list[int]) -> str:
    """Mean ± std (points) per row and cutoff."""
    lines = [f"| Model (seeds {', '.join(map(str, seeds))}) | NDCG@1 | NDCG@3 | NDCG@10 |", "|:---|---:|---:|---:|"]
    for name, cells in summary.items():
        lines.append(f"| {name} | " + " | ".join(f"{100 * cells[f'ndcg@{k}'][0]:.1f} ± {100 * cells[f'ndcg@{k}'][1]:.1f}"
                                                  for k in KS) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="7,8,9", help="comma-separated training seeds (default 7,8,9)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from pipeline.features.pairs import build_pairs
    from pipeline.ingest.ingest import ingest_dates
    from pipeline.simulate.simulate import simulate

    settings = Settings.from_env()
    start, days = dt.date(2026, 1, 1), PROFILES["quick"].days
    started = time.perf_counter()
    simulate(settings, start, days, seed=7)
    ingest_dates(settings, [start + dt.timedelta(days=i) for i in range(days)])
    build_pairs(settings, seed=7)
    seeds = [int(s) for s in args.seeds.split(",")]
    per_seed = {seed: one_seed(settings, seed) for seed in seeds}
    summary = summarise(per_seed)
    result = {"benchmark": "seeds", "profile": "quick", "seeds": seeds, "per_seed": per_seed, "summary": summary,
              "seconds": round(time.perf_counter() - started, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(summary, seeds))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
