"""The LSTM-RNN tower of the paper, eq. (2), written out.

    y_g(t) = g(W4 l(t) + W_rec4 y(t-1) + b4)
    i(t)   = sigma(W3 l(t) + W_rec3 y(t-1) + W_p3 c(t-1) + b3)
    f(t)   = sigma(W2 l(t) + W_rec2 y(t-1) + W_p2 c(t-1) + b2)
    c(t)   = f(t) o c(t-1) + i(t) o y_g(t)
    o(t)   = sigma(W1 l(t) + W_rec1 y(t-1) + W_p1 c(t) + b1)
    y(t)   = o(t) o h(c(t))

g = h = tanh; c(0) = y(0) = 0. The paper's experiments drop the forget gate (f = 1) and the
peepholes, which is the default here. The input blocks W1..W4 are one EmbeddingBag over
trigram ids (``W l(t)`` of every gate at once), the recurrent blocks one matrix, so a word
costs one matmul; peepholes are full ``ncell x ncell`` matrices as in the paper's appendix (its gradient
for W_p1 is an outer product). The sentence vector is ``y`` at the last real word.
"""
from __future__ import annotations

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch
from encoders.towers.input_layer import WordHashing, glorot_, run_recurrence
from encoders.towers.tower_catalog import TowerSpec

SPEC = TowerSpec(
    name="lstm", label="LSTM-RNN", cls="LSTMTower", order=1, recurrent=True, size_keys=("ncell",),
    defaults={"ncell": 96, "forget_gate": False, "peepholes": False, "init_scale": 0.1},
)


class LSTMCell(nn.Module):
    """Eq. (2) for one direction: input blocks, recurrent blocks, optional f(t) and peepholes."""

    def __init__(self, vocab_size: int, ncell: int, forget_gate: bool, peepholes: bool, init_scale: float) -> None:
        super().__init__()
        self.ncell, self.forget_gate, self.peepholes = ncell, forget_gate, peepholes
        #: gate blocks in storage order: the sigmoid gates, then the cell input y_g (W4)
        self.gates = ("i", "f", "o", "g") if forget_gate else ("i", "o", "g")
        width = len(self.gates) * ncell
        self.inputs = WordHashing(vocab_size, width, init_scale)  # W1..W4 (W l(t) of every gate)
        self.recurrent = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, ncell)))  # W_rec1..4
        self.bias = nn.Parameter(torch.zeros(width))  # b1..b4
        if peepholes:
            self.peep_output = nn.Linear(ncell, ncell, bias=False)  # W_p1
            self.peep_input = nn.Linear(ncell, ncell, bias=False)  # W_p3
            if forget_gate:
                self.peep_forget = nn.Linear(ncell, ncell, bias=False)  # W_p2
            glorot_(self)

    def step(self, x_t: torch.Tensor, state: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        """One word: (W l(t) + b of every gate, (y(t-1), c(t-1))) -> ((y(t), c(t)), gate values)."""
        y_prev, c_prev = state
        n, sig = self.ncell, len(self.gates) - 1
        pre = torch.addmm(x_t, y_prev, self.recurrent.t())
        y_g = torch.tanh(pre[:, sig * n :])
        if self.peepholes:
            split = dict(zip(self.gates, pre.split(n, dim=1)))
            act = {"i": torch.sigmoid(split["i"] + self.peep_input(c_prev))}
            if self.forget_gate:
                act["f"] = torch.sigmoid(split["f"] + self.peep_forget(c_prev))
        else:
            act = dict(zip(self.gates, torch.sigmoid(pre[:, : sig * n]).split(n, dim=1)))
        c = torch.addcmul(act["f"] * c_prev if self.forget_gate else c_prev, act["i"], y_g)
        if self.peepholes:
            act["o"] = torch.sigmoid(split["o"] + self.peep_output(c))
        y = act["o"] * torch.tanh(c)
        return (y, c), {**act, "c": c, "y": y}

    def run(self, batch: SentenceBatch, reverse: bool = False, record: bool = False) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Read every sentence (right-to-left with ``reverse``): y at its last word, and the trace."""
        words = self.inputs(batch) + self.bias  # W l(t) + b of every gate, one row per word
        zeros = words.new_zeros((batch.num_sentences, self.ncell))
        return run_recurrence(self.step, words, batch, (zeros, zeros), reverse=reverse, record=record)


class LSTMTower(nn.Module):
    """LSTM-RNN sentence embedding: ``y`` at the last word of a left-to-right reading."""

    def __init__(self, vocab_size: int, ncell: int, forget_gate: bool, peepholes: bool, init_scale: float) -> None:
        super().__init__()
        self.cell = LSTMCell(vocab_size, ncell, forget_gate, peepholes, init_scale)
        self.out_dim = ncell

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """Sentence vectors ``[B, ncell]``."""
        return self.cell.run(batch)[0]

    @torch.no_grad()
    def trace(self, batch: SentenceBatch, reverse: bool = False) -> dict[str, torch.Tensor]:
        """Per-word i(t), c(t), o(t), y(t) (and f(t)) as ``[B, T, ncell]`` at word positions, zeros beyond
        each length; ``reverse``: the same weights reading right to left."""
        return self.cell.run(batch, reverse=reverse, record=True)[1]
