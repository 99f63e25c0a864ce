"""The search modes ``deepsent search`` serves over one index, and the choice of the default on held-out clicks.

- ``dense``: the index's top-k by the model's cosine (a first-stage retriever);
- ``rrf``: reciprocal-rank fusion (k = 60) of the index's and BM25's top :data:`DEPTH` (the formula of the ``rrf``
  baseline of ``deepsent compare``);
- ``linear``: the union of both first stages' top :data:`DEPTH`, scored w·cosine + (1 − w)·BM25
  (each min-max scaled within the candidates), w fitted on held-out clicks (the formula and weight grid of the
  ``linear`` baseline). Kept over ranx's ``optimize_fusion`` + ``fuse`` because it measured better: ranx scores a
  title missing from one first stage 0 there, this scores every candidate by both (``bench/search/fusion.py``,
  docs/RESULTS.md);
- ``bm25``: BM25 alone (served when it is measured best: the honest default then);
- ``rerank``: BM25's top :data:`DEPTH` re-ranked by the model's cosine (LSTM-DSSM as the paper uses
  it: a re-ranker of a first stage's candidates). Not the union with the index's top: with an exact
  index the union re-ranked by the same cosine is the dense ranking itself.

Each hit says which first stage found it (``dense``, ``bm25`` or ``dense+bm25``). ``deepsent index``
measures Recall@10 of every mode on the held-out click pairs (``pairs/valid.parquet``: queries that
never reached training, their clicked titles as the relevant ones) over the whole indexed corpus and
writes the best mode into the index manifest as the default (:func:`choose_default_mode`); no judged
set is read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from encoders.search.fusion import RRF_K, WEIGHT_GRID, fuse_ranked, normalise
from encoders.search.vectors import unit

#: How deep each first stage goes before fusion or re-ranking.
DEPTH = 100


@dataclass(frozen=True)
class ServedMode:
    """One way ``deepsent search`` serves: its name, its formula, the first stages it reads, and its label as a row of
    the retrieval table (None: the row is not the model's: BM25's own row, or the model's dense row)."""

    name: str
    formula: str
    first_stages: tuple[str, ...]
    row_label: str | None = None


#: The served modes, declared once: the CLI's choices and help, the retrieval table's rows, the docs' list, the
#: choice of the default (ties go to the first) and the index manifest's check all read this table.
SERVED_MODES = (
    ServedMode("dense", "the index's top k by cosine", ("dense",)),
    ServedMode("rrf", f"reciprocal-rank fusion (k = {RRF_K}) of the index's and BM25's top max(k, {DEPTH})",
               ("dense", "bm25"), "rrf: reciprocal-rank fusion with BM25"),
    ServedMode("rerank", f"BM25's top max(k, {DEPTH}) re-ranked by the model's cosine", ("bm25",),
               f"BM25 top {DEPTH} re-ranked"),
    ServedMode("linear", f"both top max(k, {DEPTH})s scored w·cosine + (1-w)·BM25, each min-max scaled, w fitted on "
               "held-out clicks", ("dense", "bm25"), "linear: w·cosine + (1-w)·BM25 (w fitted on held-out clicks)"),
    ServedMode("bm25", "BM25 alone, only titles sharing a word with the query", ("bm25",)),
)
MODES = tuple(mode.name for mode in SERVED_MODES)


def modes_help() -> str:
    """Every served mode and its formula, for ``--mode``'s help."""
    return "; ".join(f"{mode.name}: {mode.formula}" for mode in SERVED_MODES)
#: Held-out queries the default mode is chosen on (the first ones in a seeded order).
CHOICE_QUERIES = 500

Hit = tuple[int, float, str]  # (row of the index, score, which first stage found it)


@dataclass(frozen=True)
class FirstStages:
    """One query's first stages: its vector, the index's top (row, cosine), BM25's top (row, score), and
    lookups of any row's BM25 score and unit title vector."""

    vector: np.ndarray
    dense: list[tuple[int, float]]
    lexical: list[tuple[int, float]]
    bm25_of: Callable[[list[int]], np.ndarray]
    title_vectors: Callable[[list[int]], np.ndarray]


def found_by(row: int, dense: set[int], lexical: set[int]) -> str:
    """``dense``, ``bm25`` or ``dense+bm25``: the first stages whose candidates hold ``row``."""
    return "+".join(name for name, rows in (("dense", dense), ("bm25", lexical)) if row in rows)


def min_max(values: np.ndarray) -> np.ndarray:
    """``values`` scaled to [0, 1] as one list (all zeros when they are equal): the linear fusion's min-max."""
    values = np.asarray(values)
    return normalise(values, np.zeros(values.size, dtype=np.int64), "minmax")


def served_hits(mode: str, k: int, stages: FirstStages, weight: float = 0.5) -> list[Hit]:
    """The top ``k`` hits of one query in ``mode``, best first (``weight``: the cosine's share in ``linear``)."""
    if mode == "dense":
        return [(row, score, "dense") for row, score in stages.dense[:k]]
    dense_rows, lexical_rows = [row for row, _ in stages.dense], [row for row, _ in stages.lexical]
    seen_dense, seen_lexical = set(dense_rows), set(lexical_rows)

    def labelled(scored: list[tuple[int, float]]) -> list[Hit]:
        return [(row, score, found_by(row, seen_dense, seen_lexical)) for row, score in scored]

    if mode == "bm25":
        return labelled(stages.lexical[:k])
    if mode == "rrf":
        return labelled(fuse_ranked([dense_rows, lexical_rows])[:k])
    candidates = sorted(seen_lexical | seen_dense) if mode == "linear" else sorted(seen_lexical)
    if not candidates:
        return []
    scores = stages.title_vectors(candidates) @ unit(stages.vector[None, :])[0]
    if mode == "linear":
        scores = weight * min_max(scores) + (1 - weight) * min_max(stages.bm25_of(candidates))
    order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), candidates[i]))[:k]
    return labelled([(candidates[i], float(scores[i])) for i in order])


def lexical_top(scores: np.ndarray, depth: int = DEPTH) -> list[tuple[int, float]]:
    """BM25's top ``depth`` (row, score) of one query's scores of every title, positive scores only (as served)."""
    return [(int(r), float(scores[r])) for r in np.argsort(-scores, kind="stable")[:depth] if scores[r] > 0]


def seeded_sample(items: list[str], seed: int, limit: int) -> list[str]:
    """Up to ``limit`` of the sorted distinct ``items``, a seeded sample kept in sorted order."""
    distinct = sorted(set(items))
    return [distinct[i] for i in sorted(np.random.default_rng(seed).permutation(len(distinct))[:limit])]


def held_out_clicks(store: Any, seed: int, limit: int = CHOICE_QUERIES) -> dict[str, set[str]]:
    """Up to ``limit`` held-out queries (a seeded sample of ``pairs/valid.parquet``) and their clicked doc ids."""
    if not store.exists("pairs/valid.parquet"):
        return {}
    table = store.read_table("pairs/valid.parquet", columns=["query", "doc_id"])
    clicked: dict[str, set[str]] = {}
    for query, doc_id in zip(table["query"].to_pylist(), table["doc_id"].to_pylist()):
        clicked.setdefault(query, set()).add(doc_id)
    return {query: clicked[query] for query in seeded_sample(list(clicked), seed, limit)}


Search = Callable[[list[str], int, str, float], list[list[str]]]


def query_recall(found: list[str], clicked: set[str]) -> float:
    """The share of one query's ``clicked`` doc ids that its ``found`` ones hold."""
    return len(set(found) & clicked) / len(clicked)


def recall_at(search: Search, clicks: dict[str, set[str]], mode: str, k: int, weight: float = 0.5) -> float:
    """Mean Recall@``k`` of ``mode`` over the queries of ``clicks`` (query -> clicked doc ids)."""
    queries = list(clicks)
    found = search(queries, k, mode, weight)
    return float(np.mean([query_recall(ids, clicks[q]) for q, ids in zip(queries, found)]))


def halves(clicks: dict[str, set[str]]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The held-out ``clicks`` split in two: the first half fits the linear weight, the second judges the modes."""
    queries = list(clicks)
    middle = len(queries) // 2
    return {q: clicks[q] for q in queries[:middle]}, {q: clicks[q] for q in queries[middle:]}


def memoized(search: Search) -> Search:
    """``search`` that answers a repeated (queries, k, mode, weight) from memory (the gate re-reads the chosen mode)."""
    answers: dict[tuple[Any, ...], list[list[str]]] = {}

    def remembered(asked: list[str], k: int, mode: str, weight: float) -> list[list[str]]:
        key = (tuple(asked), k, mode, weight)
        if key not in answers:
            answers[key] = search(asked, k, mode, weight)
        return answers[key]

    return remembered


def fit_linear_weight_by_recall(search: Search, clicks: dict[str, set[str]], k: int = 10) -> float:
    """The cosine's share in ``linear`` (of the fusions' one grid, :data:`encoders.search.fusion.WEIGHT_GRID`) with
    the best Recall@``k`` on ``clicks``; ties go to the weight nearest 0.5; 0.5 when there are no clicks."""
    if not clicks:
        return 0.5
    by_weight = {w: recall_at(search, clicks, "linear", k, w) for w in WEIGHT_GRID}
    return max(WEIGHT_GRID, key=lambda w: (round(by_weight[w], 6), -abs(w - 0.5)))


def choose_default_mode(search: Search, clicks: dict[str, set[str]], k: int = 10) -> dict[str, Any]:
    """The linear weight fitted on the first half of the held-out ``clicks``, Recall@``k`` of every mode on the
    other half, and the best mode (``dense`` when there are no held-out clicks; ties: the first of :data:`MODES`)."""
    if len(clicks) < 2:
        return {"default_mode": "dense", "chosen_on": "no held-out clicks", "queries": 0, f"recall_at_{k}": {}}
    fit, judge = halves(clicks)
    weight = fit_linear_weight_by_recall(search, fit, k)
    recall = {mode: recall_at(search, judge, mode, k, weight) for mode in MODES}
    best = max(MODES, key=lambda mode: (round(recall[mode], 6), -MODES.index(mode)))
    return {"default_mode": best, "linear_weight": weight,
            "chosen_on": "held-out click pairs (pairs/valid.parquet): linear weight on one half, modes on the other",
            "queries": len(judge), "weight_queries": len(fit), f"recall_at_{k}": {m: round(v, 4) for m, v in recall.items()}}
