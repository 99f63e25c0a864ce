"""The search modes ``deepsent search`` serves over one index, and the choice of the default on held-out clicks.

- ``dense``: the index's top-k by the model's cosine (a first-stage retriever);
- ``hybrid``: reciprocal-rank fusion (k = 60) of the index's and BM25's top :data:`DEPTH`;
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

from typing import Any, Callable

import numpy as np

from encoders.search.fusion import fuse_ranked
from encoders.search.vectors import unit

MODES = ("dense", "hybrid", "rerank", "bm25")
#: How deep each first stage goes before hybrid fusion or re-ranking.
DEPTH = 100
#: Held-out queries the default mode is chosen on (the first ones in a seeded order).
CHOICE_QUERIES = 500

Hit = tuple[int, float, str]  # (row of the index, score, which first stage found it)


def found_by(row: int, dense: set[int], lexical: set[int]) -> str:
    """``dense``, ``bm25`` or ``dense+bm25``: the first stages whose candidates hold ``row``."""
    return "+".join(name for name, rows in (("dense", dense), ("bm25", lexical)) if row in rows)


def served_hits(mode: str, k: int, query_vector: np.ndarray, dense: list[tuple[int, float]],
                lexical: list[tuple[int, float]], title_vectors: Callable[[list[int]], np.ndarray]) -> list[Hit]:
    """The top ``k`` hits of one query in ``mode`` from its dense and BM25 (row, score) lists, best first."""
    if mode == "dense":
        return [(row, score, "dense") for row, score in dense[:k]]
    dense_rows, lexical_rows = [row for row, _ in dense], [row for row, _ in lexical]
    seen_dense, seen_lexical = set(dense_rows), set(lexical_rows)
    if mode == "bm25":
        return [(row, score, found_by(row, seen_dense, seen_lexical)) for row, score in lexical[:k]]
    if mode == "hybrid":
        fused = fuse_ranked([dense_rows, lexical_rows])[:k]
        return [(row, score, found_by(row, seen_dense, seen_lexical)) for row, score in fused]
    candidates = sorted(seen_lexical)
    if not candidates:
        return []
    cosines = title_vectors(candidates) @ unit(query_vector[None, :])[0]
    order = sorted(range(len(candidates)), key=lambda i: (-float(cosines[i]), candidates[i]))[:k]
    return [(candidates[i], float(cosines[i]), found_by(candidates[i], seen_dense, seen_lexical)) for i in order]


def held_out_clicks(store: Any, seed: int, limit: int = CHOICE_QUERIES) -> dict[str, set[str]]:
    """Up to ``limit`` held-out queries (a seeded sample of ``pairs/valid.parquet``) and their clicked doc ids."""
    if not store.exists("pairs/valid.parquet"):
        return {}
    table = store.read_table("pairs/valid.parquet", columns=["query", "doc_id"])
    clicked: dict[str, set[str]] = {}
    for query, doc_id in zip(table["query"].to_pylist(), table["doc_id"].to_pylist()):
        clicked.setdefault(query, set()).add(doc_id)
    queries = sorted(clicked)
    chosen = np.random.default_rng(seed).permutation(len(queries))[:limit]
    return {queries[i]: clicked[queries[i]] for i in sorted(chosen)}


def choose_default_mode(search: Callable[[list[str], int, str], list[list[str]]], clicks: dict[str, set[str]],
                        k: int = 10) -> dict[str, Any]:
    """Recall@``k`` of every mode on the held-out ``clicks`` (query -> clicked doc ids) and the best mode
    (``dense`` when there are no held-out clicks, or on a tie, the first of :data:`MODES`)."""
    if not clicks:
        return {"default_mode": "dense", "chosen_on": "no held-out clicks", "queries": 0, f"recall_at_{k}": {}}
    queries = list(clicks)
    recall = {}
    for mode in MODES:
        found = search(queries, k, mode)
        recall[mode] = float(np.mean([len(set(ids) & clicks[q]) / len(clicks[q]) for q, ids in zip(queries, found)]))
    best = max(MODES, key=lambda mode: (round(recall[mode], 6), -MODES.index(mode)))
    return {"default_mode": best, "chosen_on": "held-out click pairs (pairs/valid.parquet)", "queries": len(queries),
            f"recall_at_{k}": {mode: round(value, 4) for mode, value in recall.items()}}
