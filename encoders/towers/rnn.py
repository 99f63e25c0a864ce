"""The plain RNN tower of the paper, eq. (1): y(t) = tanh(W l(t) + W_rec y(t-1) + b)."""
from __future__ import annotations

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch
from encoders.towers.input_layer import WordHashing, run_recurrence
from encoders.towers.tower_catalog import TowerSpec

SPEC = TowerSpec(
    name="rnn", label="RNN", cls="RNNTower", order=2, recurrent=True, size_keys=("nhid",), lr=0.03,
    defaults={"nhid": 288, "init_scale": 0.1},
)


class RNNTower(nn.Module):
    """Elman RNN over word-hashed words; the sentence vector is y at the last word."""

    def __init__(self, vocab_size: int, nhid: int, init_scale: float) -> None:
        super().__init__()
        self.inputs = WordHashing(vocab_size, nhid, init_scale)  # W
        self.recurrent = nn.Parameter(nn.init.xavier_uniform_(torch.empty(nhid, nhid)))  # W_rec
        self.bias = nn.Parameter(torch.zeros(nhid))  # b
        self.out_dim = nhid

    def step(self, x_t: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        """One word: (W l(t) + b, (y(t-1),)) -> ((y(t),), {"y": y(t)})."""
        y = torch.tanh(torch.addmm(x_t, state[0], self.recurrent.t()))
        return (y,), {"y": y}

    def _run(self, batch: SentenceBatch, record: bool, reverse: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        words = self.inputs(batch) + self.bias
        start = (words.new_zeros((batch.num_sentences, self.out_dim)),)
        return run_recurrence(self.step, words, batch, start, reverse=reverse, record=record)

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """Sentence vectors ``[B, nhid]``."""
        return self._run(batch, record=False)[0]

    @torch.no_grad()
    def trace(self, batch: SentenceBatch, reverse: bool = False) -> dict[str, torch.Tensor]:
        """Per-word y(t) as ``[B, T, nhid]`` at word positions, zeros beyond each length; ``reverse``: the
        same weights reading right to left."""
        return self._run(batch, record=True, reverse=reverse)[1]
