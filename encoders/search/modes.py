"""The search modes a served index answers in: each one class, carrying its first stages and how it combines them.

- ``dense``: the index's top-k by the model's cosine (a first-stage retriever);
- ``rrf``: reciprocal-rank fusion (k = 60) of the index's and BM25's top :data:`DEPTH` (the formula of the ``rrf``
  baseline of ``deepsent compare``);
- ``linear``: the union of both first stages' top :data:`DEPTH`, scored w·cosine + (1 − w)·BM25
  (each min-max scaled within the candidates), w fitted on the decision set (the formula and weight grid of the
  ``linear`` baseline). Kept over ranx's ``optimize_fusion`` + ``fuse`` because it measured better: ranx scores a
  title missing from one first stage 0 there, this scores every candidate by both (``bench/search/fusion.py``,
  docs/RESULTS.md);
- ``bm25``: BM25 alone (served when it is measured best: the honest default then);
- ``rerank``: BM25's top :data:`DEPTH` re-ranked by the model's cosine (LSTM-DSSM as the paper uses
  it: a re-ranker of a first stage's candidates). Not the union with the index's top: with an exact
  index the union re-ranked by the same cosine is the dense ranking itself.

Each hit says which first stage found it (``dense``, ``bm25`` or ``dense+bm25``); a served hit is one :class:`Hit`
record wherever it is shown (``deepsent search``, the HTTP API, the search page). A new mode is one class here,
added to :data:`SERVED_MODES`: the CLI's choices, the server, the retrieval table's rows, the docs' list and the
choice of the default (:mod:`encoders.search.served`) all read that tuple.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar

import numpy as np

from encoders.search.fusion import RRF_K, fuse_ranked, normalise
from encoders.search.vectors import unit

#: How deep each first stage goes before fusion or re-ranking.
DEPTH = 100

Labelled = tuple[int, float, str]  # (row of the index, score, which first stage found it)
Scored = list[tuple[int, float]]  # (row, score), best first


@dataclass(frozen=True)
class Hit:
    """One served hit, as ``deepsent search --json``, the HTTP API and the search page all show it (a row of the
    search results' Parquet beside its query)."""

    rank: int
    doc_id: str
    title: str
    score: float  # float32, as the results' score column holds it
    found_by: str  # the first stages that found it: dense, bm25 or dense+bm25

    @classmethod
    def field_names(cls) -> list[str]:
        """The names of a hit's fields, in order (the JSON's keys, the results' columns after the query)."""
        return [field.name for field in fields(cls)]

    def to_json(self) -> dict[str, Any]:
        """The hit as one JSON object (its fields, in order)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class FirstStages:
    """One query's first stages: its vector, the index's top (row, cosine), BM25's top (row, score), and
    lookups of any row's BM25 score and unit title vector."""

    vector: np.ndarray
    dense: Scored
    lexical: Scored
    bm25_of: Callable[[list[int]], np.ndarray]
    title_vectors: Callable[[list[int]], np.ndarray]

    def labelled(self, scored: Scored) -> list[Labelled]:
        """``scored`` with the first stages that found each row (``dense``, ``bm25`` or ``dense+bm25``)."""
        dense, lexical = {row for row, _ in self.dense}, {row for row, _ in self.lexical}
        return [(row, score, "+".join(name for name, rows in (("dense", dense), ("bm25", lexical)) if row in rows))
                for row, score in scored]

    def cosines(self, rows: list[int]) -> np.ndarray:
        """The model's cosine of the query with each of ``rows``' titles."""
        return self.title_vectors(rows) @ unit(self.vector[None, :])[0]


def min_max(values: np.ndarray) -> np.ndarray:
    """``values`` scaled to [0, 1] as one list (all zeros when they are equal): the linear fusion's min-max."""
    values = np.asarray(values)
    return normalise(values, np.zeros(values.size, dtype=np.int64), "minmax")


def best(rows: list[int], scores: np.ndarray, k: int) -> Scored:
    """The top ``k`` of ``rows`` by ``scores`` (ties: the lower row first)."""
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]))[:k]
    return [(rows[i], float(scores[i])) for i in order]


class ServedMode:
    """One way a served index answers: its name, formula, the first stages it reads, its label as a row of the
    retrieval table (None: the row is not the model's), and how it turns the first stages into the top ``k``."""

    name: ClassVar[str]
    formula: ClassVar[str]
    first_stages: ClassVar[tuple[str, ...]]
    row_label: ClassVar[str | None] = None

    def depth(self, k: int) -> int:
        """How deep each first stage goes for ``k`` hits (each reaches k, so k hits can be served)."""
        return max(k, DEPTH)

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        """The top ``k`` hits of one query, best first (``weight``: the cosine's share where the mode mixes)."""
        raise NotImplementedError


class Dense(ServedMode):
    name, formula, first_stages = "dense", "the index's top k by cosine", ("dense",)

    def depth(self, k: int) -> int:
        return k

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        return [(row, score, "dense") for row, score in stages.dense[:k]]


class ReciprocalRank(ServedMode):
    name, first_stages = "rrf", ("dense", "bm25")
    formula = f"reciprocal-rank fusion (k = {RRF_K}) of the index's and BM25's top max(k, {DEPTH})"
    row_label = "rrf: reciprocal-rank fusion with BM25"

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        return stages.labelled(fuse_ranked([[row for row, _ in stages.dense], [row for row, _ in stages.lexical]])[:k])


class Rerank(ServedMode):
    name, first_stages = "rerank", ("bm25",)
    formula = f"BM25's top max(k, {DEPTH}) re-ranked by the model's cosine"
    row_label = f"BM25 top {DEPTH} re-ranked"

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        rows = sorted(row for row, _ in stages.lexical)
        return stages.labelled(best(rows, stages.cosines(rows), k)) if rows else []


class Linear(ServedMode):
    name, first_stages = "linear", ("dense", "bm25")
    formula = (f"both top max(k, {DEPTH})s scored w·cosine + (1-w)·BM25, each min-max scaled, w fitted on the decision "
               "set (the gate set, else held-out clicks)")
    row_label = "linear: w·cosine + (1-w)·BM25 (w fitted on the decision set)"

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        rows = sorted({row for row, _ in stages.dense} | {row for row, _ in stages.lexical})
        if not rows:
            return []
        scores = weight * min_max(stages.cosines(rows)) + (1 - weight) * min_max(stages.bm25_of(rows))
        return stages.labelled(best(rows, scores, k))


class Lexical(ServedMode):
    name, formula, first_stages = "bm25", "BM25 alone, only titles sharing a word with the query", ("bm25",)

    def hits(self, k: int, stages: FirstStages, weight: float) -> list[Labelled]:
        return stages.labelled(stages.lexical[:k])


#: The served modes, declared once (ties in the choice of the default go to the first).
SERVED_MODES: tuple[ServedMode, ...] = (Dense(), ReciprocalRank(), Rerank(), Linear(), Lexical())
MODES = tuple(mode.name for mode in SERVED_MODES)
MODE = {mode.name: mode for mode in SERVED_MODES}


def modes_help() -> str:
    """Every served mode and its formula, for ``--mode``'s help."""
    return "; ".join(f"{mode.name}: {mode.formula}" for mode in SERVED_MODES)


def lexical_top(scores: np.ndarray, depth: int = DEPTH, scored: np.ndarray | None = None) -> Scored:
    """BM25's top ``depth`` (row, score) of one query's scores of every title, positive scores only (as served);
    ``scored``: the rows with a score, in order, when known (only those are sorted: the same order, ties to the lower
    row)."""
    rows = np.argsort(-scores, kind="stable") if scored is None else scored[np.argsort(-scores[scored], kind="stable")]
    return [(int(r), float(scores[r])) for r in rows[:depth] if scores[r] > 0]
