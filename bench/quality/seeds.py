"""The quick chain's decisions over several training seeds: what ships, the mix, and the shipped model on the dev set.

One simulated click log (seed 7, the quick profile's 30 days, ingested and paired once); per seed S the chain's own
stage functions (:mod:`deepsent.stages`) with ``ChainRun(seed=S)``: featurize, train the quick grid (LSTM-RNN
ncell 96 and DSSM, n = 4, 8 epochs), the ensemble's mix and the ship choice, both decided on the gate set
(the demo's gate slice). Then the shipped model and MiniLM off the shelf re-rank the dev set: NDCG@1/3/10 and the
paired t-test of their difference per cutoff. Writes ``bench/results/seeds.json`` (rendered in docs/RESULTS.md).

    DEEPSENT_STORE=/tmp/seeds .venv/bin/python -m bench.quality.seeds --seeds 7,8,9
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from bench import RESULTS
from deepsent.profiles import PROFILES
from pipeline.core.config import Settings

KS = (1, 3, 10)
OUT = RESULTS / "seeds.json"


def one_seed(settings: Settings, seed: int) -> dict[str, Any]:
    """The chain's decisions with training seed ``seed``, and the shipped model against MiniLM on the dev set."""
    from deepsent import stages
    from deepsent.chain_results import ChainRun
    from encoders.training.ensemble_build import off_the_shelf_model
    from eval.promotion.gate import score_models
    from eval.judgments import load_judged_set
    from eval.model_scorer import ModelScorer
    from eval.significance import compare_paired

    run = ChainRun(settings=settings, profile=PROFILES["quick"], seed=seed)
    features = stages.featurize(run)
    trained = [stages.train(run, features, point) for point in run.profile.models]
    ensemble = stages.ensemble(run, features, trained)
    ship = stages.ship(run, features, trained, ensemble)
    minilm = off_the_shelf_model(settings, ensemble.model_uri)
    dev = load_judged_set(settings.dev_judgments)
    shipped, reference = score_models(settings, dev, [ModelScorer(ship.model_uri), ModelScorer(minilm)])
    versus = {}
    for k in KS:
        test = compare_paired(shipped.valid(k), reference.valid(k), seed=seed)
        versus[f"ndcg@{k}"] = {"shipped": shipped.mean(k), "minilm": reference.mean(k), "diff": test.mean_diff,
                               "p_value": test.p_value}
    return {"shipped": ship.name, "off_the_shelf": ship.off_the_shelf, "ship_margin": ship.margin,
            "ship_summary": ship.summary, "mix": ensemble.chosen_mix, "best_mix": float(max(
                ensemble.curve, key=lambda w: ensemble.curve[w])), "mix_margin": ensemble.margin,
            "gate_scores": ship.scores, "signal": ship.signal, "dev": versus}


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
    per_seed = {}
    for seed in seeds:
        per_seed[seed] = one_seed(settings, seed)
        print(f"seed {seed}: {per_seed[seed]['ship_summary']}", flush=True)
    result = {"benchmark": "seeds", "profile": "quick", "seeds": seeds, "per_seed": per_seed,
              "seconds": round(time.perf_counter() - started, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
