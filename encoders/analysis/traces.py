"""Looking inside a trained recurrent tower (paper section V-A): gate traces, keywords, topics.

* :func:`activation_traces` runs a tower on raw texts and returns, per word, i(t), c(t), o(t)
  and y(t) of every cell (f(t) too when the model has a forget gate) for a left-to-right and
  a right-to-left reading. Right to left is the BiLSTM's own backward cell; for a
  unidirectional LSTM or RNN it is the same tower (same weights) reading the words in
  reverse order, as the paper could only do with its BiLSTM. Values of both readings sit at
  the word they were computed on, and only real words are kept (no padding).
* :func:`detect_keywords` follows section V-A2: take the ``top`` most active cells of the final
  y (largest ``|y|`` after the last word read); a cell detects a word when its y moves at that
  word by more than ``threshold`` times the cell's range over the sentence (max - min of
  y over the reading, the zero start included). A relative threshold makes "a large enough
  change" mean the same for a saturated and a quiet cell and for models whose activations
  differ in scale (it is invariant to rescaling y); a word carrying 20% of a cell's swing is a
  real event, a 2% wobble is not. On titles of a trained LSTM (ncell=96) 0.2 marks about a
  third of the (word, top cell) pairs, 0.1 about 60%; the paper's Table II marks 45%.
  The first word read is never counted (footnote 3: the state starts at zero, so every cell
  jumps there).
* :func:`keyword_table` gives Tables I-II (counts per word in both directions, keywords = more
  than ``share`` of the top cells in every counted direction); :func:`topic_allocation` gives
  Table III (the words taken by the 5 most active cells of each query, aggregated per cell).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from encoders.towers.text_batches import texts_to_batch
from pipeline.core.errors import ConfigError, InputError
from pipeline.features.trigram import TrigramVocab
from pipeline.text.textnorm import tokens

#: Gate panels in the paper's order (Figs. 4-5): input gate, cell state, output gate, output.
GATES = ("i", "c", "o", "y")
#: Default relative threshold of :func:`detect_keywords` (share of the cell's range of y).
DEFAULT_THRESHOLD = 0.2
#: A word is a keyword when more than this share of the top cells detect it (paper: 40%).
KEYWORD_SHARE = 0.4


@dataclass(frozen=True)
class Trace:
    """Activations of one sentence: ``forward``/``backward`` map gate -> ``[T, ncell]`` (real words only)."""

    text: str
    side: str
    model_type: str
    words: tuple[str, ...]
    forward: dict[str, np.ndarray]
    backward: dict[str, np.ndarray]
    backward_source: str

    @property
    def ncell(self) -> int:
        """Number of cells (or RNN neurons)."""
        return int(self.forward["y"].shape[1])


@dataclass(frozen=True)
class Detection:
    """Which of the ``top`` most active cells detect each word of one reading."""

    cells: np.ndarray  # [top] cell indices (0-based), most active first
    detected: np.ndarray  # [T, top] bool, at word positions
    counts: list[int | None]  # detecting cells per word; None for the first word read


@dataclass(frozen=True)
class KeywordTable:
    """Tables I-II for one sentence: detecting cells per word, both readings, and the keywords."""

    words: tuple[str, ...]
    left_to_right: list[int | None]
    right_to_left: list[int | None]
    keywords: list[bool]
    top: int
    model_type: str
    backward_source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"words": list(self.words), "left_to_right": self.left_to_right, "right_to_left": self.right_to_left,
                "keywords": [w for w, k in zip(self.words, self.keywords) if k], "is_keyword": self.keywords,
                "top": self.top, "model_type": self.model_type, "right_to_left_source": self.backward_source}


@dataclass(frozen=True)
class TopicAllocation:
    """Table III: per query, the words taken by each of its ``top`` most active cells."""

    queries: list[str]
    per_query: list[dict[int, list[str]]]  # cell index -> words it took in that query
    top: int
    by_cell: dict[int, Counter[str]] = field(default_factory=dict)  # cell -> word counts over queries

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with 1-based cell names as in the paper ("cell 26")."""
        return {
            "top": self.top,
            "queries": [{"query": q, "cells": {f"cell {c + 1}": w for c, w in sorted(cells.items())}}
                        for q, cells in zip(self.queries, self.per_query)],
            "by_cell": {f"cell {c + 1}": dict(words.most_common()) for c, words in sorted(self.by_cell.items())},
        }


# ---- traces -----------------------------------------------------------------------------------
def tower_of(model_or_tower: nn.Module, side: str) -> nn.Module:
    """The ``query``/``doc`` tower of a two-tower model, or the tower itself."""
    if side not in ("query", "doc"):
        raise ConfigError(f"side must be 'query' or 'doc', got {side!r}")
    towers = getattr(model_or_tower, "towers", None)
    return towers()[side] if callable(towers) else model_or_tower


def _readings(tower: nn.Module, batch: Any) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], str]:
    """Left-to-right and right-to-left records ``[B, T, n]`` of a recurrent tower (its ``trace``), and the R2L source."""
    if not callable(getattr(tower, "trace", None)):
        kind = getattr(tower, "model_type", type(tower).__name__)
        raise ConfigError(f"model type {kind!r} has no recurrent state to analyse; use an lstm, bilstm or rnn model")
    source = ("the BiLSTM's own backward cell" if hasattr(tower, "backward_cell")
              else "the same tower (same weights) reading the words right to left")
    return tower.trace(batch), tower.trace(batch, reverse=True), source


@torch.no_grad()
def activation_traces(model_or_tower: nn.Module, vocab: TrigramVocab, texts: Sequence[str], side: str = "query",
                      max_words: int | None = None) -> list[Trace]:
    """Traces of ``texts`` through one tower (one batch), each cut at ``max_words`` words (the model's features' cut)."""
    tower = tower_of(model_or_tower, side)
    words = [tuple(tokens(t)[:max_words] if max_words else tokens(t)) for t in texts]
    for row, sentence in enumerate(words, start=1):
        if not sentence:
            raise InputError(f"{side} texts", "empty after normalisation: nothing to trace", row=row)
    was_training = tower.training
    tower.eval()
    try:
        fwd, bwd, source = _readings(tower, texts_to_batch(list(texts), vocab, max_words))
    finally:
        tower.train(was_training)
    kind = str(getattr(tower, "model_type", type(tower).__name__))
    return [
        Trace(text=text, side=side, model_type=kind, words=sentence, backward_source=source,
              forward={k: v[b, : len(sentence)].cpu().numpy().astype(np.float64) for k, v in fwd.items()},
              backward={k: v[b, : len(sentence)].cpu().numpy().astype(np.float64) for k, v in bwd.items()})
        for b, (text, sentence) in enumerate(zip(texts, words))
    ]


def activation_trace(model_or_tower: nn.Module, vocab: TrigramVocab, text: str, side: str = "query",
                     max_words: int | None = None) -> Trace:
    """i(t), c(t), o(t), y(t) of every cell over the words of ``text`` (Figs. 4-5), both readings."""
    return activation_traces(model_or_tower, vocab, [text], side, max_words)[0]


# ---- keywords (section V-A2) ----------------------------------------------------------------------
def detect_keywords(y: np.ndarray, top: int = 10, threshold: float = DEFAULT_THRESHOLD,
                    reverse: bool = False) -> Detection:
    """Words detected by the ``top`` most active cells of the final y (see the module docstring).

    ``y`` is ``[T, ncell]`` at word positions; ``reverse`` means it was read right to left
    (so the final y is at word 0 and the change at word t is ``y(t) - y(t+1)``).
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] == 0:
        raise ValueError(f"y must be [T >= 1, ncell], got shape {y.shape}")
    if threshold <= 0 or top < 1:
        raise ValueError(f"need threshold > 0 and top >= 1, got {threshold}, {top}")
    order = np.arange(y.shape[0])[::-1] if reverse else np.arange(y.shape[0])
    read = y[order]
    cells = np.argsort(-np.abs(read[-1]), kind="stable")[: min(top, y.shape[1])]
    with_start = np.vstack([np.zeros((1, y.shape[1])), read])[:, cells]
    change = np.abs(np.diff(with_start, axis=0))
    span = with_start.max(axis=0) - with_start.min(axis=0)
    hit = (change > threshold * span) & (span > 0)
    hit[0] = False  # footnote 3: the first word read always moves every cell from zero
    detected = np.zeros_like(hit)
    detected[order] = hit
    counts: list[int | None] = [int(n) for n in detected.sum(axis=1)]
    counts[int(order[0])] = None
    return Detection(cells=cells, detected=detected, counts=counts)


def keyword_table(trace: Trace, top: int = 10, threshold: float = DEFAULT_THRESHOLD,
                  share: float = KEYWORD_SHARE) -> KeywordTable:
    """Tables I-II: cells detecting each word per reading; keywords pass ``share * top`` in every counted reading.

    The first word read in a direction has no count there (footnote 3); a word counted in only
    one direction (the sentence's first or last) is judged on that one.
    """
    l2r = detect_keywords(trace.forward["y"], top, threshold).counts
    r2l = detect_keywords(trace.backward["y"], top, threshold, reverse=True).counts
    limit = share * min(top, trace.ncell)
    keywords = []
    for a, b in zip(l2r, r2l):
        counted = [n for n in (a, b) if n is not None]
        keywords.append(bool(counted) and all(n > limit for n in counted))
    return KeywordTable(trace.words, l2r, r2l, keywords, min(top, trace.ncell), trace.model_type, trace.backward_source)


# ---- topics (section V-A3) ----------------------------------------------------------------------
def topic_allocation(traces: Sequence[Trace], top: int = 5, threshold: float = DEFAULT_THRESHOLD) -> TopicAllocation:
    """Table III: for each query, the words detected (left to right) by each of its ``top`` most active cells."""
    per_query: list[dict[int, list[str]]] = []
    by_cell: dict[int, Counter[str]] = {}
    for trace in traces:
        found = detect_keywords(trace.forward["y"], top, threshold)
        cells: dict[int, list[str]] = {}
        for k, cell in enumerate(found.cells.tolist()):
            taken = [w for w, hit in zip(trace.words, found.detected[:, k]) if hit]
            if taken:
                cells[cell] = taken
                by_cell.setdefault(cell, Counter()).update(taken)
        per_query.append(cells)
    return TopicAllocation([t.text for t in traces], per_query, top, by_cell)


def busiest_cells(topics: TopicAllocation) -> list[tuple[int, int]]:
    """(cell, number of queries it took words from), busiest first (then most words, then cell index)."""
    queries_of = {c: sum(c in q for q in topics.per_query) for c in topics.by_cell}
    order = sorted(topics.by_cell, key=lambda c: (-queries_of[c], -sum(topics.by_cell[c].values()), c))
    return [(c, queries_of[c]) for c in order]


def cell_words(topics: TopicAllocation, cell: int, max_words: int | None = None) -> str:
    """The words a cell took, most frequent first, with counts above one: ``door (3), glass``."""
    return ", ".join(f"{w} ({n})" if n > 1 else w for w, n in topics.by_cell[cell].most_common(max_words))


def topic_summary(topics: TopicAllocation, max_cells: int = 6, max_words: int = 6) -> str:
    """A few sentences on which cells gather which words (busiest cells first)."""
    if not topics.by_cell:
        return f"No cell of the {topics.top} most active per query detected any word in {len(topics.queries)} queries."
    busiest = busiest_cells(topics)
    total = sum(sum(w.values()) for w in topics.by_cell.values())
    head = sum(sum(topics.by_cell[c].values()) for c, _ in busiest[:3])
    lines = [f"{len(topics.by_cell)} cells take at least one word over {len(topics.queries)} queries "
             f"({total} word assignments); the 3 busiest gather {100 * head / total:.0f}% of them."]
    lines += [f"cell {c + 1} ({n} queries): {cell_words(topics, c, max_words)}" for c, n in busiest[:max_cells]]
    return "\n".join(lines)
