"""Benchmark: does the served index cost quality? The champion's served default mode on the dev set, searched through
an exact index and through the index ``deepsent index`` serves (:func:`encoders.search.vector_index.plan`'s rule),
per query, judged by the retrieval table's paired test (t-test and bootstrap CI over queries).

Both runs are ``compare --retrieval``'s own (:func:`eval.retrieval.run_dense` with its served modes) over the run's
corpus plus the judged titles it lacks, the served mode and linear weight chosen on the decision set as the index
chooses them; the exact one with the rule's exact bound raised above the corpus. Reads ``DEEPSENT_STORE`` after
``make run``.

    DEEPSENT_STORE=... .venv/bin/python -m bench.search.served_quality [--model-uri URI] [--out PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import RESULTS, write_results

DEFAULT_OUT = RESULTS / "served-quality.json"


def served_runs(settings: Any, model_uri: str, exact_max: int, seed: int) -> list[Any]:
    """The dense row and the served modes' rows of ``model_uri`` on the dev set, the index built with ``exact_max`` as
    the rule's exact bound."""
    from encoders.search import vector_index as vi
    from encoders.search.bm25 import BM25Index
    from encoders.search.corpus_index import tuning_queries
    from pipeline.ingest.catalog.corpus import corpus_titles
    from eval.baselines.base import FitContext
    from eval.decisions.gate_set import served_decision
    from eval.judgments import load_judged_set
    from eval.model_scorer import ModelScorer
    from eval.retrieval.compare import build_corpus, query_texts
    from eval.retrieval.served import ServedSetup, run_dense
    from eval.retrieval.metrics import evaluate_rankings, qrels_of
    from eval.retrieval.served import served_fit
    from pipeline.storage.store import Store
    from pipeline.features.click_lists import held_out_clicks

    vi.EXACT_MAX = exact_max  # read by the rule each time an index is built
    store, judged = Store.from_settings(settings), load_judged_set(settings.dev_judgments)
    queries = query_texts(judged)
    scorer = ModelScorer(model_uri)
    scorer.fit(FitContext(settings, store, [], [], [], queries, seed))
    documents = corpus_titles(settings, store)[0]
    corpus = build_corpus(documents, judged)
    qrels = qrels_of(judged, corpus.row_of())
    bm25 = BM25Index()
    bm25.fit_corpus(corpus.titles)
    served = ServedSetup(bm25, held_out_clicks(store), served_fit(corpus.doc_ids, corpus.titles,
                                                                  {doc for doc, _ in documents}),
                         served_decision(settings))
    return run_dense(model_uri, model_uri, "model", scorer, corpus, queries,
                     lambda ranked: evaluate_rankings(ranked, qrels, len(corpus.doc_ids)), seed, served,
                     tuning_queries(store, seed))


def default_run(runs: list[Any]) -> Any:
    """The run of the mode served by default."""
    default = runs[0].details["default_mode"]
    return next(run for run in runs if run.details.get("mode", "dense") == default)


def described(run: Any, dense: Any) -> dict[str, Any]:
    """A run's mode, metrics and latency, and the index its dense row searched."""
    from eval.retrieval.metrics import metric_names

    return {"mode": run.details.get("mode", "dense"), "linear_weight": run.details.get("linear_weight"),
            **{metric: round(run.result.mean(metric), 4) for metric in metric_names()},
            "latency": run.details["latency"], "index": dense.details["search"],
            "approximate": dense.details["approximate"]}


def main(argv: Sequence[str] | None = None) -> int:
    """Both runs, their paired test per metric, and the JSON."""
    from encoders.model.ranker_registry import CHAMPION_URI
    from encoders.search import vector_index as vi
    from eval.retrieval.metrics import metric_names, versus
    from pipeline.core.config import Settings
    from pipeline.core.defaults import SEED

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-uri", default=CHAMPION_URI)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not os.environ.get("DEEPSENT_STORE"):
        parser.error("needs DEEPSENT_STORE: a store after make run")
    settings, rule_bound = Settings.from_env(), vi.EXACT_MAX
    exact_runs = served_runs(settings, args.model_uri, 10**12, SEED)
    rule_runs = served_runs(settings, args.model_uri, rule_bound, SEED)
    exact, served = default_run(exact_runs), default_run(rule_runs)
    tests = {metric: versus(served.result, exact.result, metric, SEED) for metric in metric_names()}
    result = {"benchmark": "served-quality", "model_uri": args.model_uri, "judgments": str(settings.dev_judgments),
              "queries": int(exact.result.valid(metric_names()[0]).size), "exact_max": rule_bound,
              "exact": described(exact, exact_runs[0]), "served": described(served, rule_runs[0]),
              "served_minus_exact": tests, "same_mode": exact.details.get("mode") == served.details.get("mode"),
              "quality_kept": all(not test["mark"] or test["diff"] > 0 for test in tests.values())}
    write_results(args.out, result)
    print("; ".join(f"{m}: exact {result['exact'][m]:.4f}, served {result['served'][m]:.4f} "
                    f"(p {t['p'] if t['p'] is None else round(t['p'], 3)})" for m, t in tests.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
