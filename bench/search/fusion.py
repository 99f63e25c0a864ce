"""Benchmark: ranx's fitted fusion against the served ``linear`` mode, over the whole corpus.

Every system fuses the same two first stages of each query, the model's exact dense top 100 (cosine)
and BM25's top 100, and fits its weights on the same held-out click queries: the first half of
``pipeline.features.click_lists.held_out_clicks`` (``pairs/valid.parquet``), as ``deepsent index`` and the gate
do, never a judged query.

- ``served linear`` (:mod:`encoders.search.served`): the union of both tops, every candidate scored by
  both scorers (cosine and BM25, each min-max scaled over the union), w·cos + (1 − w)·BM25, w on the fusions'
  0.05 grid by Recall@10;
- ``ranx wsum``: ``ranx.optimize_fusion(method="wsum", norm="min-max", metric="recall@10")`` over the two
  runs, then ``ranx.fuse``: each run min-max scaled over its own top 100, a title missing from a run
  scores 0 there;
- ``ranx rrf``: reciprocal-rank fusion with its k optimised the same way.

Each is judged on the dev judged set (Recall@10, Recall@100, NDCG@10; paired t-test against the served
linear mode, the reference here), then written as JSON.

    DEEPSENT_STORE=... MLFLOW_TRACKING_URI=... .venv/bin/python -m bench.search.fusion \
        --model-uri models:/deepsent-ranker/1 [--out bench/results/fusion.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from bench import RESULTS
from encoders.search.bm25 import BM25Index
from encoders.search.served import halves
from encoders.search.served_index import ServedIndex
from encoders.search.topk import exact_index, search_rows
from encoders.search.vectors import unit
from eval.baselines.base import FitContext
from eval.compare import versus_reference
from eval.judgments import load_judged_set
from eval.model_scorer import ModelScorer
from eval.retrieval.compare import build_corpus, query_texts
from eval.retrieval.metrics import evaluate_rankings, qrels_of
from eval.retrieval.served import DEPTH, fitted_linear_weight, lexical_candidates, served_rankings
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.features.click_lists import held_out_clicks
from pipeline.ingest.catalog.corpus import corpus_titles
from pipeline.storage.store import Store

DEFAULT_OUT = RESULTS / "fusion.json"
METRICS = ("recall@10", "recall@100", "ndcg@10")


class FirstStageRuns:
    """Both first stages of some queries as ranx runs (query ids "0", "1", ...; doc ids of the corpus)."""

    def __init__(self, scorer: ModelScorer, bm25: BM25Index, titles: np.ndarray, index: Any, doc_ids: list[str],
                 queries: list[str]):
        from ranx import Run

        self.vectors = scorer.encode(queries, "query")
        self.ranked = search_rows(index, self.vectors, DEPTH)
        self.lexical = lexical_candidates(bm25, queries)
        cosines = np.einsum("qkd,qd->qk", unit(titles)[self.ranked], unit(self.vectors))
        self.dense = Run({str(q): {doc_ids[r]: float(c) for r, c in zip(rows, cos) if r >= 0}
                          for q, (rows, cos) in enumerate(zip(self.ranked, cosines))}, name="dense")
        # ranx wants every query in every run: a query BM25 finds nothing for keeps a zero-score placeholder
        self.bm25 = Run({str(q): {doc_ids[r]: s for r, s in top} or {doc_ids[0]: 0.0}
                         for q, top in enumerate(self.lexical.top)}, name="bm25")


def fused_rows(run: Any, row_of: dict[str, int], queries: int) -> np.ndarray:
    """A ranx run as (queries, DEPTH) corpus rows, best first (ties by row), -1 padded."""
    by_query = run.to_dict()
    out = np.full((queries, DEPTH), -1, dtype=np.int64)
    for q in range(queries):
        scored = sorted(((-s, row_of[d]) for d, s in by_query.get(str(q), {}).items()))[:DEPTH]
        out[q, :len(scored)] = [row for _, row in scored]
    return out


def main() -> None:
    """Fit each fusion on held-out clicks, judge it on the dev set, print and write the figures."""
    from ranx import Qrels, fuse, optimize_fusion

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-uri", required=True, help="the model whose dense top is fused with BM25's")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON output path")
    args = parser.parse_args()
    settings = Settings.from_env()
    store = Store.from_settings(settings)
    judged = load_judged_set(settings.dev_judgments)
    corpus = build_corpus(corpus_titles(settings, store)[0], judged)
    scorer = ModelScorer(args.model_uri)
    scorer.fit(FitContext(settings, store, [], [], [], []))
    titles = scorer.encode(corpus.titles, "doc")
    index, row_of = exact_index(titles).index, corpus.row_of()
    bm25 = BM25Index()
    bm25.fit_corpus(corpus.titles)
    held_out = held_out_clicks(store)
    clicks = halves(held_out)[0]  # what the served weight is fitted on

    fit = FirstStageRuns(scorer, bm25, titles, index, corpus.doc_ids, list(clicks))
    click_qrels = Qrels({str(q): {d: 1 for d in docs} for q, docs in enumerate(clicks.values())})
    ranx_params = {method: optimize_fusion(click_qrels, [fit.dense, fit.bm25], norm="min-max", method=method,
                                           metric="recall@10")
                   for method in ("wsum", "rrf")}
    searcher = ServedIndex.in_memory(scorer, titles, corpus.doc_ids, corpus.titles, bm25)
    weight = fitted_linear_weight(searcher, held_out)

    queries = query_texts(judged)
    dev = FirstStageRuns(scorer, bm25, titles, index, corpus.doc_ids, queries)
    qrels = qrels_of(judged, row_of)
    served, _ = served_rankings(searcher, "linear", queries, dev.vectors, weight)
    systems = {"served linear": (served, {"weight": weight})}
    for method, params in ranx_params.items():
        fused = fuse([dev.dense, dev.bm25], norm="min-max", method=method, params=params)
        systems[f"ranx {method}"] = (fused_rows(fused, row_of, len(queries)), params)
    results = {name: evaluate_rankings(rows, qrels, len(corpus.doc_ids)) for name, (rows, _) in systems.items()}
    reference = results["served linear"]
    report: dict[str, Any] = {"model_uri": args.model_uri, "fit_queries": len(clicks), "judged": Path(judged.source).name,
                              "corpus_titles": len(corpus.doc_ids), "systems": {}}
    print(f"| system (dev, {len(corpus.doc_ids)} titles) | fitted on {len(clicks)} held-out click queries | "
          + " | ".join(METRICS) + " |\n|:---|:---|" + "---:|" * len(METRICS))
    for name, (_, params) in systems.items():
        row: dict[str, Any] = {"params": {k: np.round(np.asarray(v, dtype=float), 3).tolist() for k, v in params.items()}}
        for metric in METRICS:
            p, _, mark = (versus_reference(results[name].valid(metric), reference.valid(metric), SEED)
                          if name != "served linear" else (None, None, ""))
            row[metric], row[f"p:{metric}"] = results[name].mean(metric), p
            row[f"mark:{metric}"] = mark
        report["systems"][name] = row
        print(f"| {name} | {row['params']} | "
              + " | ".join(f"{100 * row[m]:.1f}{row[f'mark:{m}']}" for m in METRICS) + " |")
    Path(args.out).write_text(json.dumps(report, indent=1, default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
