"""DSSM tower (Huang et al. 2013, as in Table IV): bag of trigrams -> 288 -> 96, tanh."""
from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from encoders.batch import SentenceBatch
from encoders.input_layer import WordHashing, glorot_


class DSSMTower(nn.Module):
    """Two tanh layers over the sentence's letter-trigram counts (word order ignored)."""

    LABEL: ClassVar[str] = "DSSM"
    DEFAULTS: ClassVar[dict[str, Any]] = {"nhid": 288, "nout": 96, "init_scale": 0.1}

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
