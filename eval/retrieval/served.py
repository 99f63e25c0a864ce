"""A model's rows of ``deepsent compare --retrieval`` as served: its dense row through the index ``deepsent index``
serves at the corpus's size (:func:`run_dense`), and its served modes (rrf, rerank, linear).

Rows are ranked by the served object (:class:`~encoders.search.served_index.ServedIndex` over the corpus, the one
``deepsent search``, the index build and the gate use), so a row is what ``deepsent search --mode ...`` returns
for the query. The linear weight is fitted on held-out click queries (``pairs/valid.parquet``), never on the judged
set the table reports. Latency is per query as served: the single-query index search, BM25's scoring and the
fusion or re-ranking (query encoding excluded).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Sequence

import numpy as np

from encoders.search import vector_index as vi
from encoders.search.modes import DEPTH  # the table's depth is the served one: its deepest recall lies within it
from encoders.search.served import DecisionQueries
from encoders.search.served_index import ServedIndex
from encoders.search.topk import exact_index, search_rows
from encoders.search.vectors import unit
from eval.retrieval.metrics import RetrievalResult
from pipeline.core.defaults import SEED

log = logging.getLogger(__name__)
#: The depth the served index's recall against exact search is measured at.
APPROX_K = 10


@dataclass
class SystemRun:
    """One searched system: its per-query metrics, the approximate index's check and its details."""

    key: str
    name: str
    kind: str
    result: RetrievalResult
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Lexical:
    """BM25 over the corpus for every query: its scores of every title, its served top (row, score), seconds."""

    scores: list[np.ndarray]
    top: list[list[tuple[int, float]]]
    seconds: np.ndarray


def lexical_candidates(scorer: Any, queries: list[str]) -> Lexical:
    """Per query, BM25's scores and its top :data:`encoders.search.modes.DEPTH` (row, score) with a positive score,
    as served, and the seconds each query's scoring took."""
    from encoders.search.modes import lexical_top

    scores, top, seconds = [], [], np.zeros(len(queries))
    for q, query in enumerate(queries):
        began = time.perf_counter()
        scored = scorer.corpus_scores(query)
        top.append(lexical_top(scored))
        seconds[q] = time.perf_counter() - began
        scores.append(scored)
    return Lexical(scores, top, seconds)


def latency_ms(seconds: np.ndarray) -> dict[str, float]:
    """p50 and p99 of per-query seconds, in milliseconds."""
    return {"p50_ms": round(float(np.percentile(seconds, 50)) * 1e3, 3),
            "p99_ms": round(float(np.percentile(seconds, 99)) * 1e3, 3)} if len(seconds) else {}


def served_rows() -> tuple[tuple[str, str], ...]:
    """(mode, row label) of every served mode built on the model with a row of its own (the table of served modes)."""
    from encoders.search.modes import SERVED_MODES

    return tuple((mode.name, mode.row_label) for mode in SERVED_MODES if mode.row_label)


def served_rankings(searcher: Any, mode: str, queries: list[str], query_vectors: np.ndarray,
                    weight: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, seconds) of ``mode`` for every query: one ``searcher.hits`` call per query, as ``deepsent search``
    serves it (its index search, BM25's scoring and the fusion or re-ranking; the query already encoded)."""
    out, seconds = np.full((len(queries), DEPTH), -1, dtype=np.int64), np.zeros(len(queries))
    for q, (query, vector) in enumerate(zip(queries, query_vectors)):
        began = time.perf_counter()
        hits = searcher.hits([query], DEPTH, mode, vector[None, :], weight)[0]
        seconds[q] = time.perf_counter() - began
        out[q, :len(hits)] = [row for row, _, _ in hits]
    return out, seconds


def served_mode_runs(run: SystemRun, searcher: Any, queries: list[str], query_vectors: np.ndarray,
                     evaluate: Callable, linear_weight: float = 0.5) -> list[SystemRun]:
    """The served modes built on ``run``'s model (``deepsent search --mode rrf|rerank|linear``) through the served
    object (``searcher``, :class:`~encoders.search.served_index.ServedIndex` over the corpus); latency per query as served
    (query encoding excluded: the same for every mode)."""
    runs = []
    for mode, label in served_rows():
        out, seconds = served_rankings(searcher, mode, queries, query_vectors, linear_weight)
        details = {**run.details, "approximate": None, "mode": mode, "latency": latency_ms(seconds),
                   "seconds": float(seconds.sum()), **({"linear_weight": linear_weight} if mode == "linear" else {})}
        runs.append(SystemRun(f"{run.key}#{mode}", f"{run.name} · {label}", run.kind, evaluate(out), details))
    return runs


def single_query_seconds(index: Any, query_vectors: np.ndarray) -> np.ndarray:
    """Seconds of each query's own top-:data:`DEPTH` search of ``index`` (one query at a time, as served)."""
    seconds = np.zeros(len(query_vectors))
    for q, vector in enumerate(unit(query_vectors)):
        began = time.perf_counter()
        index.search(vector[None, :], min(DEPTH, index.ntotal))
        seconds[q] = time.perf_counter() - began
    return seconds


def fitted_linear_weight(searcher: Any, decision: DecisionQueries) -> float:
    """The cosine's share in ``linear`` fitted on the first half of ``decision``'s queries over ``searcher``'s corpus
    (0.5 when there are none): the same queries, grid and rule as ``deepsent index`` and the gate
    (:func:`encoders.search.served.choose_default_mode`), so the row measures the weight that is served."""
    from encoders.search.served import fit_linear_weight, halves

    relevant = decision.within(set(searcher.doc_ids)).relevant
    if len(relevant) < 2:
        return 0.5
    fit = halves(relevant)[0]
    return fit_linear_weight(searcher.mode_search(list(fit)), fit)


def served_choice(searcher: Any, decision: DecisionQueries, seed: int = SEED) -> dict[str, Any]:
    """What ``deepsent index`` would serve over ``searcher``'s corpus: the linear weight fitted on the first half of
    ``decision``'s queries and the default mode chosen on the other (:func:`encoders.search.served.choose_default_mode`;
    the weight is :func:`fitted_linear_weight`'s)."""
    from encoders.search.served import choose_default_mode

    asked = decision.within(set(searcher.doc_ids))
    choice = choose_default_mode(searcher.mode_search(list(asked.relevant)), asked, seed=seed)
    return {"linear_weight": choice.get("linear_weight", 0.5), "default_mode": choice["default_mode"]}


def is_served_default(run: SystemRun) -> bool:
    """Whether ``run`` is its model's mode that ``deepsent index``'s rule would serve by default."""
    return run.details.get("default_mode") is not None and run.details.get("default_mode") == run.details.get("mode", "dense")


def served_fit(doc_ids: list[str], titles: list[str], served_ids: Collection[str] | None) -> tuple[np.ndarray, Any] | None:
    """The corpus rows whose doc id the index serves (``served_ids``, when the searched corpus holds more: judged
    titles added) and BM25 fitted on their titles alone; None when it serves every row."""
    from encoders.search.bm25 import BM25Index

    if served_ids is None:
        return None
    served = set(served_ids)
    rows = np.array([r for r, doc in enumerate(doc_ids) if doc in served], dtype=np.int64)
    if len(rows) == len(doc_ids):
        return None
    bm25 = BM25Index()
    bm25.fit_corpus([titles[r] for r in rows])
    return rows, bm25


def fit_searcher(searcher: Any, scorer: Any, vectors: np.ndarray, doc_ids: list[str], titles: list[str],
                 fit: tuple[np.ndarray, Any] | None, tune_vectors: np.ndarray | None = None, seed: int = SEED) -> Any:
    """What the served modes' weight and default are fitted over: ``searcher``, or (``fit``, :func:`served_fit`) the
    served object over the rows the index serves alone (its FAISS index by the served rule, tuned on
    ``tune_vectors``), as the gate and ``deepsent index`` fit them."""
    from encoders.search.served_index import ServedIndex

    if fit is None:
        return searcher
    rows, bm25 = fit
    return ServedIndex.in_memory(scorer, vectors[rows], [doc_ids[r] for r in rows], [titles[r] for r in rows], bm25,
                                 tune_vectors, seed)


@dataclass(frozen=True)
class ServedSetup:
    """What the served modes' rows need beside the model: BM25 fitted on the corpus, and the held-out click queries
    their linear weight is fitted on; ``fit``: the corpus rows the index serves when the corpus holds more (judged
    titles added), with BM25 fitted on them alone, so the weight and default are fitted as the gate and the index fit
    them."""

    bm25: Any
    clicks: dict[str, set[str]]
    fit: tuple[np.ndarray, Any] | None = None
    decision: DecisionQueries | None = None  # the queries the served mode is chosen on (default: the clicks)


def run_dense(key: str, name: str, kind: str, scorer: Any, corpus: Any, queries: list[str],
              evaluate: Callable, seed: int, served: ServedSetup | None = None,
              tune: Sequence[str] = ()) -> list[SystemRun]:
    """A fitted text encoder searched over ``corpus`` (an :class:`eval.retrieval.Corpus`) through the index ``deepsent
    index`` would serve for it (exact when small, IVF above, nprobe tuned on ``tune``'s queries:
    :func:`~encoders.search.vector_index.build`), with its
    recall@10 against exact search when it is approximate; with ``served``, also its served modes through the served
    object (rrf, rerank, linear)."""
    began = time.perf_counter()
    titles, query_vectors = scorer.encode(corpus.titles, "doc"), scorer.encode(queries, "query")
    encoded = time.perf_counter()
    approximate = vi.plan(len(titles)) != "exact"
    tune_vectors = scorer.encode(list(tune), "query") if approximate and tune else None
    searcher = ServedIndex.in_memory(scorer, titles, corpus.doc_ids, corpus.titles, served.bm25 if served else None,
                                     tune_vectors, seed)
    ranked = search_rows(searcher.index, query_vectors, DEPTH)
    details = {**scorer.describe(), "search": searcher.manifest["index_type"], "encode_seconds": encoded - began,
               "approximate": None, "latency": latency_ms(single_query_seconds(searcher.index, query_vectors))}
    if approximate:
        exact = search_rows(exact_index(titles).index, query_vectors, APPROX_K)
        details["approximate"] = {"type": searcher.manifest["index_type"], "params": searcher.manifest["params"],
                                  "build_seconds": searcher.manifest["build_seconds"],
                                  "recall@10_vs_exact": vi.recall_at_k(ranked[:, :APPROX_K], exact)}
    details["seconds"] = time.perf_counter() - began
    log.info("%s: encoded and searched %d titles in %.1f s (%s)", key, len(titles), details["seconds"],
             details["search"])
    dense_run = SystemRun(key, name, kind, evaluate(ranked), details)
    if served is None:
        return [dense_run]
    fitted = fit_searcher(searcher, scorer, titles, corpus.doc_ids, corpus.titles, served.fit, tune_vectors, seed)
    choice = served_choice(fitted, served.decision or DecisionQueries.of_clicks(served.clicks), seed)
    dense_run.details["default_mode"] = choice["default_mode"]
    return [dense_run, *served_mode_runs(dense_run, searcher, queries, query_vectors, evaluate, choice["linear_weight"])]
