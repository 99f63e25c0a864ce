"""The word layer ``W l(t)`` shared by every tower, and the plumbing of recurrent towers.

A word is a bag of letter-trigram ids, so ``W l(t)`` is the count-weighted sum of the
word's trigram rows of ``W``: one ``nn.EmbeddingBag(mode="sum")``. Recurrent towers place
the word vectors with ``index_put`` (see stack.md: split + pad_sequence makes the backward
pass explode on CPU) in time-major packed order, longest sentence first, and run their cell
at step t on the sentences still reading (a prefix of that order): nothing is padded, so
padding can never reach a sentence's state. Per-word traces come back as ``[B, T, n]``
(zeros beyond each length) through :func:`scatter_words`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch

#: A recurrent cell step: (inputs at t [n, G], state tuple) -> (new state, record of gates).
CellStep = Callable[[torch.Tensor, tuple[torch.Tensor, ...]], tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]]


class WordHashing(nn.Module):
    """``W l(t)``: every word (or whole sentence) as the weighted sum of its trigram rows."""

    def __init__(self, vocab_size: int, dim: int, init_scale: float) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab_size, dim, mode="sum")
        nn.init.uniform_(self.bag.weight, -init_scale, init_scale)

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """One vector per word of the batch, ``[W, dim]`` in batch order."""
        return self.bag(batch.ids, batch.offsets, per_sample_weights=batch.weights)

    def sentences(self, batch: SentenceBatch) -> torch.Tensor:
        """One bag per sentence (all its trigrams), ``[B, dim]``: the DSSM input."""
        first_word = torch.cumsum(batch.lengths, 0) - batch.lengths
        return self.bag(batch.ids, batch.offsets[first_word], per_sample_weights=batch.weights)


def scatter_words(word_vectors: torch.Tensor, batch: SentenceBatch) -> torch.Tensor:
    """Word vectors ``[W, d]`` placed at ``[sentence, position]`` of a zero ``[B, T, d]`` tensor."""
    row, pos = batch.word_positions()
    out = word_vectors.new_zeros((batch.num_sentences, batch.max_len, word_vectors.shape[-1]))
    return out.index_put((row, pos), word_vectors)


@dataclass
class PackedWords:
    """Word inputs in time-major packed order: the words of step t are rows ``[start_t, start_t + counts[t])``.

    Sentences are ordered longest first (``rank[b]`` is sentence b's place in that order), so at
    every step the sentences still reading form a prefix of it.
    """

    data: torch.Tensor
    counts: list[int]
    rank: torch.Tensor
    index: torch.Tensor  # packed row of every word, in batch order


def pack_words(word_inputs: torch.Tensor, batch: SentenceBatch, reverse: bool = False) -> PackedWords:
    """Place the word inputs ``[W, G]`` in packed order with ``index_put`` (``reverse``: right to left)."""
    lengths = batch.lengths
    order = torch.argsort(lengths, descending=True, stable=True)
    rank = torch.argsort(order)
    row, pos = batch.word_positions()
    step_pos = lengths[row] - 1 - pos if reverse else pos
    counts_t = (lengths.unsqueeze(0) > torch.arange(batch.max_len, device=lengths.device).unsqueeze(1)).sum(1)
    index = (torch.cumsum(counts_t, 0) - counts_t)[step_pos] + rank[row]
    data = word_inputs.new_zeros(word_inputs.shape).index_put((index,), word_inputs)
    return PackedWords(data, counts_t.tolist(), rank, index)


def run_recurrence(
    step: CellStep,
    word_inputs: torch.Tensor,
    batch: SentenceBatch,
    initial_state: tuple[torch.Tensor, ...],
    reverse: bool = False,
    record: bool = False,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Run ``step`` over each sentence's words (``word_inputs [W, G]``); the output at its last word.

    ``initial_state[0]`` is the output ``y``. Sentences are processed longest first and leave
    the batch after their last word, so padding never touches their state; the words of
    time step t are one contiguous block (a packed sequence). ``reverse`` reads right to
    left. With ``record`` the per-step records come back as ``[B, T, n]`` at each word's own
    position (zeros beyond each length).
    """
    packed = pack_words(word_inputs, batch, reverse)
    order = torch.argsort(packed.rank)
    state = tuple(s.index_select(0, order) for s in initial_state)
    finished: list[torch.Tensor] = []
    records: dict[str, list[torch.Tensor]] = {}
    for now, x_t in zip(packed.counts, packed.data.split(packed.counts)):
        if now < state[0].shape[0]:
            finished.append(state[0][now:])
            state = tuple(s[:now] for s in state)
        state, rec = step(x_t, state)
        if record:
            for key, value in rec.items():
                records.setdefault(key, []).append(value)
    finished.append(state[0])
    last = torch.cat(finished[::-1], 0).index_select(0, packed.rank)
    traced = {k: scatter_words(torch.cat(v, 0)[packed.index], batch) for k, v in records.items()}
    return last, traced


def glorot_(module: nn.Module) -> None:
    """Glorot-uniform weights and zero biases for every Linear layer of ``module``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

