"""CLSM tower (Shen et al. 2014, as in Table IV): trigram windows -> conv -> max-pool -> 96-d.

Each window of ``win`` consecutive words (zero words beyond the sentence edges) is the
concatenation of their trigram vectors; the convolution is ``sum_k W_k l(t + k - win//2)``,
computed as one EmbeddingBag giving every word's ``W_k l`` for all k, then shifted along the
flat word list (a neighbour from another sentence counts as zero) and summed; the max-pooling
is a per-sentence ``scatter_reduce``. Nothing is padded to ``[B, T, .]``.
"""
from __future__ import annotations

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch
from encoders.towers.input_layer import WordHashing, glorot_
from encoders.towers.tower_catalog import TowerSpec

SPEC = TowerSpec(
    name="clsm", label="CLSM", cls="CLSMTower", order=5, size_keys=("win",),
    defaults={"win": 3, "nhid": 288, "nout": 96, "init_scale": 0.1},
)


class CLSMTower(nn.Module):
    """Convolution over word windows, tanh, max-pooling over positions, tanh semantic layer."""

    def __init__(self, vocab_size: int, win: int, nhid: int, nout: int, init_scale: float) -> None:
        super().__init__()
        if win < 1 or win % 2 == 0:
            raise ValueError(f"clsm window must be a positive odd number, got {win}")
        self.win, self.nhid = win, nhid
        self.conv = WordHashing(vocab_size, win * nhid, init_scale)  # W_1..W_win side by side
        self.conv_bias = nn.Parameter(torch.zeros(nhid))
        self.semantic = nn.Linear(nhid, nout)
        glorot_(self)
        self.out_dim = nout

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """Sentence vectors ``[B, nout]``."""
        words = self.conv(batch).view(-1, self.win, self.nhid)  # every word's W_k l, k = 0..win-1
        row, pos = batch.word_positions()
        length, half = batch.lengths[row], self.win // 2
        conv = words[:, half] + self.conv_bias
        for k in range(self.win):
            shift = k - half  # window slot k of word t holds word t + shift
            if shift:
                inside = ((pos + shift >= 0) & (pos + shift < length)).unsqueeze(1)
                conv = conv + torch.roll(words[:, k], -shift, dims=0) * inside
        hidden = torch.tanh(conv)
        pooled = hidden.new_full((batch.num_sentences, self.nhid), float("-inf")).scatter_reduce(
            0, row.unsqueeze(1).expand_as(hidden), hidden, reduce="amax", include_self=False)
        return torch.tanh(self.semantic(pooled))
