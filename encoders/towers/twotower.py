"""Query tower Lambda_Q and document tower Lambda_D, cosine score R (eq. 3) and the loss of eq. (5)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from encoders.towers.batch import PairBatch, SentenceBatch
from encoders.towers.tower_classes import build_tower, display_name, param_count


class TwoTowerModel(nn.Module):
    """Two towers of the same type with separate weights; ``forward`` gives R(Q, D) per candidate.

    A tower config with ``shared: true`` uses one tower for queries and titles; ``in_batch: true``
    adds, in training, the other examples' clicked titles to each query's negatives.
    """

    def __init__(self, model_type: str, vocab_size: int, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.query_tower = build_tower(model_type, vocab_size, **(config or {}))
        shared = bool(self.query_tower.config.get("shared", False))
        self.doc_tower = self.query_tower if shared else build_tower(model_type, vocab_size, **(config or {}))
        self.in_batch = bool(self.query_tower.config.get("in_batch", False))
        self.model_type = model_type
        self.vocab_size = vocab_size
        self.config: dict[str, Any] = dict(self.query_tower.config)
        self.out_dim: int = self.query_tower.out_dim

    @property
    def name(self) -> str:
        """Display name, e.g. ``LSTM-RNN (ncell=96)``."""
        return display_name(self.model_type, self.config)

    def towers(self) -> dict[str, nn.Module]:
        """The two towers by side (their gradients are re-normalised separately)."""
        return {"query": self.query_tower, "doc": self.doc_tower}

    def param_counts(self) -> dict[str, int]:
        """Trainable parameters of each tower and in total (a shared tower counted once)."""
        query, doc = param_count(self.query_tower), param_count(self.doc_tower)
        return {"query": query, "doc": doc, "total": query + (0 if self.doc_tower is self.query_tower else doc)}

    def embed(self, batch: SentenceBatch, side: str) -> torch.Tensor:
        """Sentence vectors of ``batch`` from the ``query`` or ``doc`` tower."""
        if side not in ("query", "doc"):
            raise ValueError(f"side must be 'query' or 'doc', got {side!r}")
        return self.towers()[side](batch)

    def forward(self, batch: PairBatch) -> torch.Tensor:
        """Cosine R(Q, D) of every query with its clicked title then its negatives, ``[B, 1 + n]``; in
        training with ``in_batch``, then with the B - 1 other clicked titles, ``[B, n + B]``."""
        query = self.query_tower(batch.query)
        docs = self.doc_tower(batch.docs).view(batch.size, 1 + batch.num_negatives, -1)
        scores = F.cosine_similarity(query.unsqueeze(1), docs, dim=-1)
        if not (self.in_batch and self.training and batch.size > 1):
            return scores
        clicked = F.normalize(docs[:, 0], dim=-1)
        others = F.normalize(query, dim=-1) @ clicked.t()  # [B, B]; the diagonal is each query's own click
        off_diagonal = ~torch.eye(batch.size, dtype=torch.bool, device=others.device)
        return torch.cat([scores, others[off_diagonal].view(batch.size, batch.size - 1)], dim=1)


def click_loss(scores: torch.Tensor, gamma: float, reduction: str = "mean") -> torch.Tensor:
    """Eq. (5): ``-log softmax(gamma R)`` of the clicked title (column 0), batch mean or sum."""
    target = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
    return F.cross_entropy(gamma * scores, target, reduction=reduction)


def ranking_stats(scores: torch.Tensor) -> dict[str, float]:
    """Sums over the batch of hit@1 and reciprocal rank of the clicked title among its negatives.

    Ties count against the clicked title (a constant model scores no hits).
    """
    rank = (scores[:, 1:] >= scores[:, :1]).sum(1) + 1
    return {"hits": float((rank == 1).sum()), "rr": float((1.0 / rank.float()).sum())}
