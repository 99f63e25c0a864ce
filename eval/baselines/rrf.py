"""BM25 fused with a trained model by reciprocal-rank fusion (k = 60): the parameter-free alternative."""
from __future__ import annotations

import numpy as np

from encoders.search.fusion import RRF_K, reciprocal_rank_fusion
from eval.baseline_catalog import BaselineSpec
from eval.baselines.linear import FusionScorer

SPEC = BaselineSpec(name="rrf", label="BM25 + model, reciprocal-rank fusion (k=60)", cls="RRFScorer", order=9,
                    reference=False)


class RRFScorer(FusionScorer):
    """``1 / (60 + rank_BM25) + 1 / (60 + rank_model)`` within each query's list; nothing is fitted."""

    name = "rrf"

    def fuse(self, model: np.ndarray, bm25: np.ndarray, group: np.ndarray) -> np.ndarray:
        """RRF of the two rankings."""
        return reciprocal_rank_fusion([model, bm25], group, RRF_K)

    def settings_text(self) -> str:
        """The constant k."""
        return f"k={RRF_K}, ties share the best rank"
