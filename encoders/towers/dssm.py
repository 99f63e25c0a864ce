"""DSSM tower (Huang et al. 2013, as in Table IV): bag of trigrams -> 288 -> 96, tanh."""
from __future__ import annotations

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch
from encoders.towers.input_layer import WordHashing, glorot_
from encoders.towers.tower_catalog import TowerSpec

SPEC = TowerSpec(
    name="dssm", label="DSSM", cls="DSSMTower", order=4, size_keys=("nhid", "nout"),
    defaults={"nhid": 288, "nout": 96, "init_scale": 0.1},
)


class DSSMTower(nn.Module):
    """Two tanh layers over the sentence's letter-trigram counts (word order ignored)."""

    def __init__(self, vocab_size: int, nhid: int, nout: int, init_scale: float) -> None:
        super().__init__()
        self.hidden = WordHashing(vocab_size, nhid, init_scale)
        self.hidden_bias = nn.Parameter(torch.zeros(nhid))
        self.semantic = nn.Linear(nhid, nout)
        glorot_(self)
        self.out_dim = nout

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """Sentence vectors ``[B, nout]``."""
        hidden = torch.tanh(self.hidden.sentences(batch) + self.hidden_bias)
        return torch.tanh(self.semantic(hidden))
