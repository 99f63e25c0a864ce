"""Bidirectional LSTM-RNN tower (Table IV): a left-to-right and a right-to-left LSTM, concatenated."""
from __future__ import annotations

import torch
from torch import nn

from encoders.towers.batch import SentenceBatch
from encoders.towers.lstm import LSTMCell
from encoders.towers.tower_catalog import TowerSpec

SPEC = TowerSpec(
    name="bilstm", label="Bidirectional LSTM-RNN", cls="BiLSTMTower", order=3, recurrent=True, size_keys=("ncell",),
    defaults={"ncell": 96, "forget_gate": False, "peepholes": False, "init_scale": 0.1},
)


class BiLSTMTower(nn.Module):
    """Two eq. (2) LSTMs with their own weights; the sentence vector is [y_fwd(last), y_bwd(first)]."""

    def __init__(self, vocab_size: int, ncell: int, forget_gate: bool, peepholes: bool, init_scale: float) -> None:
        super().__init__()
        self.forward_cell = LSTMCell(vocab_size, ncell, forget_gate, peepholes, init_scale)
        self.backward_cell = LSTMCell(vocab_size, ncell, forget_gate, peepholes, init_scale)
        self.out_dim = 2 * ncell

    def forward(self, batch: SentenceBatch) -> torch.Tensor:
        """Sentence vectors ``[B, 2 * ncell]`` (left-to-right half first)."""
        return torch.cat([self.forward_cell.run(batch)[0], self.backward_cell.run(batch, reverse=True)[0]], 1)

    @torch.no_grad()
    def trace(self, batch: SentenceBatch, reverse: bool = False) -> dict[str, torch.Tensor]:
        """The left-to-right cell's gates, or with ``reverse`` the right-to-left cell's, ``[B, T, ncell]``.

        Position t is always word t of the sentence: the right-to-left values are put back at
        the word they were computed on (its state then covers words t..end).
        """
        cell = self.backward_cell if reverse else self.forward_cell
        return cell.run(batch, reverse=reverse, record=True)[1]
