"""MRR and hit@1 of trained models (and BM25) on the held-out click pairs of several feature versions.

Models trained on different negative sources are early-stopped on their own validation pairs, whose
negatives differ (random ones are easy, skipped ones hard), so their own MRRs are not comparable.
This scores every model on every version's validation pairs (the clicked title among its n
negatives, ties against it) to choose between sources on held-out clicks, never on a judged set.

    .venv/bin/python -m bench.quality.click_mrr --models URI,URI --features V1,V2 [--out PATH]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from encoders.search.fusion import click_mrr
from eval.baselines.base import FitContext
from eval.baselines.linear import click_bm25
from eval.model_scorer import ModelScorer
from pipeline.core.config import Settings
from pipeline.features.click_lists import valid_click_lists
from pipeline.features.feature_files import read_manifest
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments


def main() -> None:
    """Print a Markdown table (rows: scorers; columns: validation sets) and write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="comma-separated model URIs")
    parser.add_argument("--features", required=True, help="comma-separated feature versions")
    parser.add_argument("--out", default="", help="JSON output path (optional)")
    args = parser.parse_args()
    settings = Settings.from_env()
    store = Store.from_settings(settings)
    versions = args.features.split(",")
    lists = {v: valid_click_lists(store, v) for v in versions}
    sources = {v: read_manifest(store, v)["params"].get("negative_source", "random") for v in versions}
    train_titles = list(dict.fromkeys(read_judgments(settings.train_judgments)["title"].to_pylist()))
    results: dict[str, dict[str, dict[str, float]]] = {
        "BM25": {v: click_mrr(click_bm25(train_titles, lists[v]), lists[v].group, lists[v].clicked) for v in versions}}
    for uri in args.models.split(","):
        scorer = ModelScorer(uri)
        scorer.fit(FitContext(settings, store, [], [], [], []))  # loads the model; nothing else is read
        results[uri] = {v: click_mrr(scorer.score(l.queries, l.titles), l.group, l.clicked) for v, l in lists.items()}
    header = "| scorer | " + " | ".join(f"{sources[v]} valid ({v}) MRR / hit@1" for v in versions) + " |"
    print(header + "\n|:---|" + "---:|" * len(versions))
    for name, row in results.items():
        print(f"| {name} | " + " | ".join(f"{row[v]['mrr']:.4f} / {row[v]['hit@1']:.4f}" for v in versions) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps({"sources": sources, "results": results}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
