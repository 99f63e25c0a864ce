"""The ensemble tower: a trained LSTM-RNN tower joined with a MiniLM tower in one vector.

Each side's vector is ``[sqrt(mix) * unit(LSTM(x)), sqrt(1 - mix) * unit(MiniLM(x))]``, so the
cosine of a query vector and a title vector is exactly ``mix * R_LSTM + (1 - mix) * R_MiniLM``: a
linear score fusion that is still one vector per text, hence one registered model that serves, embeds
and indexes (inner product) like every tower. Nothing here is trained by SGD: ``deepsent ensemble``
(:mod:`encoders.training.ensemble_build`) copies the weights of a trained LSTM-RNN (and of a fine-tuned MiniLM,
or keeps the packaged all-MiniLM-L6-v2) into it and fits ``mix`` on held-out click lists.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from encoders.towers.batch import MixedBatch
from encoders.towers.tower_catalog import TowerSpec
from pipeline.core.errors import ConfigError

SPEC = TowerSpec(
    name="ensemble", label="LSTM-RNN + MiniLM", cls="EnsembleTower", order=7, inputs="both", size_keys=("ncell",),
    defaults={"ncell": 96, "forget_gate": False, "peepholes": False, "init_scale": 0.1, "max_tokens": 256, "mix": 0.5},
)
#: the towers an ensemble joins: its trigram part, then its text part
PARTS = ("lstm", "minilm")


class EnsembleTower(nn.Module):
    """An LSTM-RNN tower and a MiniLM tower, their unit vectors weighted by ``sqrt(mix)`` and ``sqrt(1 - mix)``."""

    def __init__(self, vocab_size: int, ncell: int, forget_gate: bool, peepholes: bool, init_scale: float,
                 max_tokens: int, mix: float) -> None:
        super().__init__()
        from encoders.towers.tower_classes import build_tower

        if not 0.0 < mix < 1.0:
            raise ConfigError(f"model 'ensemble': mix={mix} must be between 0 and 1 (exclusive)")
        self.trigram_part = build_tower(PARTS[0], vocab_size, ncell=ncell, forget_gate=forget_gate,
                                        peepholes=peepholes, init_scale=init_scale)
        self.text_part = build_tower(PARTS[1], vocab_size, max_tokens=max_tokens)
        self.register_buffer("scales", torch.tensor([math.sqrt(mix), math.sqrt(1.0 - mix)]))
        self.out_dim = int(self.trigram_part.out_dim + self.text_part.out_dim)

    def forward(self, batch: MixedBatch) -> torch.Tensor:
        """Joined vectors ``[B, d_LSTM + d_MiniLM]`` of unit norm."""
        if not isinstance(batch, MixedBatch):
            raise TypeError(f"the ensemble tower reads texts and trigrams (MixedBatch), got {type(batch).__name__}")
        trigram = F.normalize(self.trigram_part(batch.trigrams).float(), dim=-1) * self.scales[0]
        text = F.normalize(self.text_part(batch.text).float(), dim=-1) * self.scales[1]
        return torch.cat([trigram, text], dim=-1)
