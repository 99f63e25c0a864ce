"""``deepsent compare --retrieval``: every judged query searches the whole corpus (beyond the paper, which re-ranks).

The corpus is the run's corpus (``pipeline.ingest.catalog.corpus.corpus_titles``: the latest catalogue's live products;
without a catalogue, both judgment files and the click pairs) plus any judged document missing from it, in
ascending document-id order (the tie rule). BM25 (bm25s over the corpus) scores every title;
each trained model (``--models``) and MiniLM off the shelf embed the queries and titles and
search them through the index ``deepsent index`` serves at the corpus's size (``encoders.search.vector_index``: exact
when small, IVF above, nprobe tuned on training click queries, never on the judged ones;
:func:`eval.retrieval.served.run_dense`), whose recall@10 against exact search is reported when it is approximate. Recall@10/@100 and NDCG@10 come from
:mod:`eval.retrieval.metrics` (unjudged titles count as not relevant), each row is compared with
BM25 by the comparison's paired t-test and bootstrap CI, and the table goes to
``reports/<run>/retrieval.{md,json}`` in the store. With training clicks in the store, BM25 + click prior
(:mod:`eval.baselines.bm25_prior`) is a row too, every row is tested against it, and every row is reported again
on the judged queries whose relevant products were never clicked (cold) and the rest (warm).
"""
from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Sequence

import numpy as np

from encoders.search import vector_index as vi
from encoders.search.corpus_index import tuning_queries
from encoders.search.topk import rows_by_scoring
from eval.baselines.base import FitContext
from eval.compare import resolve_baselines, split_baseline, versus_reference
from eval.judgments import JudgedSet, load_judged_set, tie_ranks
from eval.results import RetrievalCompareResult
from eval.retrieval.metrics import NDCG_K, RetrievalResult, evaluate_rankings, metric_names, qrels_of, versus
from eval.retrieval.served import (
    DEPTH,
    Lexical,
    ServedSetup,
    SystemRun,
    is_served_default,
    latency_ms,
    lexical_candidates,
    run_dense,
    served_fit,
    served_rows,
)
from eval.baselines.bm25_prior import PRIOR_LABEL, click_prior_run, cold_start_caption, cold_start_report
from eval.report import BETTER, WORSE, retrieval_markdown, split_markdown
from eval.significance import ALPHA
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.storage.store import Store
from pipeline.storage.locations import report_file

log = logging.getLogger(__name__)

RETRIEVAL_BASELINES = ("bm25", "minilm")


@dataclass(frozen=True)
class Corpus:
    """The searched titles, row i = (doc_ids[i], titles[i]), rows in ascending document-id order."""

    doc_ids: list[str]
    titles: list[str]

    def row_of(self) -> dict[str, int]:
        """Corpus row of each document id."""
        return {doc: row for row, doc in enumerate(self.doc_ids)}


def build_corpus(documents: Iterable[tuple[str, str]], judged: JudgedSet) -> Corpus:
    """(doc_id, title) documents (first title per id kept) plus the judged set's missing ones, by ascending id."""
    return corpus_of([*documents, *zip(judged.doc_id, judged.title)])


def corpus_of(documents: Iterable[tuple[str, str]]) -> Corpus:
    """(doc_id, title) documents, the first title per id kept, in ascending document-id order (the tie rule)."""
    docs: dict[str, str] = {}
    for doc, title in documents:
        docs.setdefault(doc, title)
    ids = list(docs)
    order = np.argsort(tie_ranks(ids), kind="stable")
    return Corpus([ids[i] for i in order], [docs[ids[i]] for i in order])


def query_texts(judged: JudgedSet) -> list[str]:
    """The normalised text of each judged query, indexed by qid."""
    out = [""] * judged.num_queries
    for q, text in zip(judged.qid.tolist(), judged.query):
        out[q] = text
    return out


def run_bm25(key: str, name: str, scorer: Any, corpus: Corpus, queries: list[str], evaluate: Callable) -> SystemRun:
    """BM25 over the corpus: every title scored for every query, top DEPTH by the tie rule."""
    began = time.perf_counter()
    scorer.fit_corpus(corpus.titles)
    ranked = rows_by_scoring(scorer.corpus_scores, queries, DEPTH)
    details = {**scorer.describe(), "search": "every title scored", "seconds": time.perf_counter() - began}
    log.info("%s: searched %d titles for %d queries in %.1f s", key, len(corpus.titles), len(queries), details["seconds"])
    return SystemRun(key, name, "baseline", evaluate(ranked), details)


def significance_rows(runs: Sequence[SystemRun], reference: SystemRun | None, seed: int) -> list[dict[str, Any]]:
    """Table rows: mean of each metric, and p-value, bootstrap CI and mark against ``reference`` (BM25)."""
    rows = []
    for run in runs:
        approx = run.details.get("approximate")
        row: dict[str, Any] = {"key": run.key, "name": run.name, "kind": run.kind, "reference": run is reference,
                               "params": run.details.get("params"), "settings": str(run.details.get("settings", "")),
                               "run_id": run.details.get("run_id"), "seconds": run.details.get("seconds"),
                               "approx_recall@10": approx["recall@10_vs_exact"] if approx else None,
                               "latency": run.details.get("latency"), "mode": run.details.get("mode", "dense"),
                               "linear_weight": run.details.get("linear_weight"),
                               "prior_weight": run.details.get("prior_weight"), "served_default": is_served_default(run),
                               "approximate": approx}
        for metric in metric_names():
            row[metric] = run.result.mean(metric)
            row[f"p:{metric}"], row[f"ci:{metric}"], row[f"sig:{metric}"] = (
                versus_reference(run.result.valid(metric), reference.result.valid(metric), seed)
                if reference is not None and run is not reference else (None, None, ""))
        rows.append(row)
    return rows


def add_versus(runs: Sequence[SystemRun], rows: Sequence[dict[str, Any]], name: str,
               other_of: Callable[[SystemRun], SystemRun | None], seed: int) -> bool:
    """Add ``name`` to each row whose run has another to be judged against (``other_of``): per metric the difference,
    its p-value, CI and mark (paired t-test). True when some row was judged so."""
    for run, row in zip(runs, rows):
        other = other_of(run)
        if other is not None and other is not run:
            row[name] = {metric: versus(run.result, other.result, metric, seed) for metric in metric_names()}
    return any(name in row for row in rows)


def versus_minilm(runs: Sequence[SystemRun], rows: Sequence[dict[str, Any]], seed: int) -> bool:
    """Add ``vs_minilm`` to each model row: the difference to MiniLM's row of the same mode (dense, rrf, rerank,
    linear) and its test: does the click training pay where it is served? True when some row was judged so."""
    minilm = {r.key.partition("#")[2]: r for r in runs
              if r.kind == "baseline" and split_baseline(r.key.partition("#")[0])[0] == "minilm"}
    return add_versus(runs, rows, "vs_minilm",
                      lambda run: minilm.get(run.key.partition("#")[2]) if run.kind == "model" else None, seed)


#: The table's optional columns, a row's test against another (key in the row, header); the cold/warm table's columns.
VERSUS_COLUMNS = (("vs_minilm", "vs MiniLM's same mode"), ("vs_prior", f"vs {PRIOR_LABEL}"))
SPLIT_COLUMNS = (("vs_bm25", "vs BM25"), ("vs_prior", f"vs {PRIOR_LABEL}"))


def caption(judged: JudgedSet, corpus_titles: int, evaluated: int, reference: SystemRun | None, notes: set[str]) -> str:
    """The table's caption: the set, the corpus, how rows are searched and marked (``notes``: the optional columns
    and marks the table has: ``vs_minilm``, ``vs_prior``, ``served_default``)."""
    ref = (f"{BETTER}/{WORSE}: significantly better/worse than BM25 (paired t-test over queries, p < {ALPHA}); "
           "95% bootstrap CIs in retrieval.json." if reference else "No BM25 row: no significance marks.")
    ref += (" 'vs MiniLM's same mode': a model row's difference (points) to MiniLM's row of the same mode at "
            f"{' / '.join(metric_names())}, {BETTER}/{WORSE} by the same test." if "vs_minilm" in notes else "")
    ref += (f" 'vs {PRIOR_LABEL}': a row's difference (points) to that row (BM25's top {DEPTH} re-scored by the "
            "products' training clicks, its weight w fitted on held-out click queries), by the same test."
            if "vs_prior" in notes else "")
    ref += (" (served default): the model's mode that deepsent index's rule serves (chosen on the decision set: the gate set, else held-out clicks)."
            if "served_default" in notes else "")
    return (f"Retrieval (%) on {judged.name}: {evaluated} queries with a positive grade, each searching all "
            f"{corpus_titles:,} corpus titles; unjudged titles count as not relevant; NDCG@{NDCG_K} with gain "
            f"2^grade - 1 (ranx ndcg_burges), ties broken by ascending document id; dense rows search the index deepsent "
            f"index serves at this corpus size (encoders.search.vector_index: exact IndexFlatIP up to "
            f"{vi.EXACT_MAX:,} titles, IVF above), its recall@10 against exact search in the approx column; the "
            f"model's other rows are "
            f"`deepsent search --mode {'|'.join(mode for mode, _ in served_rows())}` of that model, by the served "
            "object; latency per query as served (one query's index search, BM25 scoring, fusion or re-ranking; query "
            f"encoding excluded), on this machine. {ref}")


def check_baselines(specs: Sequence[str]) -> None:
    """Stop with one line when a baseline cannot search a corpus (only bm25 and minilm can)."""
    wrong = [s for s in specs if split_baseline(s)[0] not in RETRIEVAL_BASELINES]
    if wrong:
        raise ConfigError(f"--retrieval supports the baselines {', '.join(RETRIEVAL_BASELINES)}; got {', '.join(wrong)}")


def retrieval_compare(settings: Settings, judgments: Path | str | None = None, fmt: str | None = None,
                      models: Sequence[str] = (), baselines: Sequence[str] | None = None, seed: int = SEED,
                      report_name: str | None = None, corpus: Corpus | None = None,
                      model_scorer: Callable[[str], Any] | None = None,
                      served_ids: Collection[str] | None = None) -> RetrievalCompareResult:
    """Search the whole corpus with BM25, each model and MiniLM for every judged query; metrics + significance
    (each dense row through the index served for this corpus size; ``served_ids``: the doc
    ids the index serves when ``corpus`` holds more, over which the served modes' weight and default are fitted)."""
    from eval.model_scorer import ModelScorer, scorer_labels

    specs = list(RETRIEVAL_BASELINES if baselines is None else baselines)
    check_baselines(specs)
    scorers, unavailable = resolve_baselines(specs)
    judged = load_judged_set(judgments or settings.dev_judgments, fmt)
    judged.require_graded_queries()
    store = Store.from_settings(settings)
    queries = query_texts(judged)
    ctx = FitContext(settings, store, [], [], [], queries, seed)
    dense = [(key, name, "baseline", s) for key, name, s in scorers if split_baseline(key)[0] != "bm25"]
    model_scorers = [(model_scorer or ModelScorer)(uri) for uri in models]
    for scorer in [s for _, _, _, s in dense] + model_scorers:  # a model that cannot load stops here, before the corpus
        scorer.fit(ctx)
    dense += [(uri, name, "model", s) for uri, name, s in zip(models, scorer_labels(model_scorers), model_scorers)]
    if corpus is None:
        from pipeline.ingest.catalog.corpus import corpus_titles

        corpus = build_corpus(corpus_titles(settings, store)[0], judged)
    qrels = qrels_of(judged, corpus.row_of())

    def evaluate(ranked: np.ndarray) -> RetrievalResult:
        return evaluate_rankings(ranked, qrels, len(corpus.doc_ids))

    bm25 = [(key, name, scorer) for key, name, scorer in scorers if split_baseline(key)[0] == "bm25"]
    runs = [run_bm25(key, name, scorer, corpus, queries, evaluate) for key, name, scorer in bm25]
    served, prior, counts = None, None, {}
    if bm25:
        from pipeline.features.click_lists import held_out_clicks

        found = lexical_candidates(bm25[0][2], queries)
        runs[0].details["latency"] = latency_ms(found.seconds)
        from eval.decisions.gate_set import served_decision

        served = ServedSetup(bm25[0][2], held_out_clicks(store), served_fit(corpus.doc_ids, corpus.titles, served_ids),
                             served_decision(settings))
        counts, prior = click_prior_run(store, served.bm25, corpus.doc_ids, Lexical([], found.top, found.seconds),
                                        served.clicks, evaluate)
        runs += [prior] if prior else []
    tune = tuning_queries(store, seed)
    runs += [r for key, name, kind, scorer in dense for r in run_dense(key, name, kind, scorer, corpus, queries, evaluate,
                                                                          seed, served, tune)]
    if not runs:
        raise ConfigError("nothing to compare: no baseline or model is available")
    reference = next((r for r in runs if split_baseline(r.key)[0] == "bm25"), None)
    rows = significance_rows(runs, reference, seed)
    versus_minilm(runs, rows, seed)
    add_versus(runs, rows, "vs_prior", lambda r: prior if r is not reference else None, seed)
    notes = {key for key in ("vs_minilm", "vs_prior", "served_default") if any(row.get(key) for row in rows)}
    evaluated = judged.num_queries - len(runs[0].result.excluded)
    cold_start = cold_start_report(runs, judged, counts, reference, prior, seed) if reference and prior else {}
    table = retrieval_markdown(rows, metric_names(), VERSUS_COLUMNS,
                               caption(judged, len(corpus.doc_ids), evaluated, reference, notes))
    if cold_start:
        table += "\n" + split_markdown(cold_start["splits"], metric_names(), SPLIT_COLUMNS, cold_start_caption(cold_start))
    run = report_name or _default_run_name(judged, specs, models, seed)
    payload = {"judgments": judged.source, "corpus_titles": len(corpus.doc_ids), "rows": rows, "cold_start": cold_start}
    report = {"retrieval.md": store.write_bytes(report_file(run, "retrieval.md"), table.encode("utf-8")),
              "retrieval.json": store.write_bytes(report_file(run, "retrieval.json"),
                                                  json.dumps(payload, indent=2, default=str).encode("utf-8"))}
    return RetrievalCompareResult(judgments=judged.source, format=judged.fmt, queries=evaluated, pairs=len(judged),
                                  corpus_titles=len(corpus.doc_ids), depth=DEPTH, reference=reference.name if reference else None,
                                  rows=rows, unavailable=unavailable, report=report, report_name=run, table_markdown=table,
                                  cold_start=cold_start)


def _default_run_name(judged: JudgedSet, specs: Sequence[str], models: Sequence[str], seed: int) -> str:
    blob = json.dumps([judged.digest(), list(specs), list(models), seed]).encode("utf-8")
    return f"retrieval-{judged.name}-{hashlib.sha256(blob).hexdigest()[:10]}"


def judged_retrieval(settings: Settings, judgments: str | Path | None = None, fmt: str | None = None,
                     **kwargs: Any) -> Any:
    """``retrieval_compare`` over the run's corpus (:func:`pipeline.ingest.catalog.corpus.corpus_titles`: the catalogue) plus
    the judged titles it lacks; the table (and its ``retrieval.md``) says how many were added. Judged sets are
    evaluation data, not catalogue: nothing else searches their titles, and the served modes' weight and default are
    fitted over the run's corpus alone, as the gate and the index fit them."""
    import dataclasses

    from pipeline.ingest.catalog.corpus import corpus_titles

    store = Store.from_settings(settings)
    judged = load_judged_set(judgments or settings.dev_judgments, fmt)
    documents, sources = corpus_titles(settings, store)
    corpus = build_corpus(documents, judged)
    added = len(corpus.doc_ids) - len({doc_id for doc_id, _ in documents})
    result = retrieval_compare(settings, judgments=judgments, fmt=fmt, corpus=corpus,
                               served_ids={doc_id for doc_id, _ in documents}, **kwargs)
    said = (f"The corpus: {len(corpus.doc_ids) - added:,} titles of {', '.join(sources)} plus the {added:,} judged "
            f"titles of {Path(judged.source).name} they lack.")
    table = f"{result.table_markdown.rstrip()}\n\n{said}\n"
    store.write_bytes(report_file(result.report_name, "retrieval.md"), table.encode("utf-8"))
    return dataclasses.replace(result, table_markdown=table)
