"""A seeded random order: the floor of the comparison table.

Each pair's score is a hash of (seed, query, title) mapped to [0, 1), so a pair scores the
same whatever batch or order it comes in, and the same seed gives the same ranking anywhere.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from eval.baseline_catalog import BaselineSpec
from eval.baselines.base import FitContext
from pipeline.core import validators as v

SPEC = BaselineSpec(name="random", label="Random order", cls="RandomScorer", order=6, reference=False, floor=True)


class RandomScorer:
    """Uniform pseudo-random scores from a keyed hash of the pair."""

    name = "random"
    OPTIONS = {"seed": v.seed}

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed

    def fit(self, ctx: FitContext) -> None:
        """Take the run's seed unless one was given."""
        if self.seed is None:
            self.seed = ctx.seed

    def score(self, queries: Sequence[str], titles: Sequence[str]) -> np.ndarray:
        """A number in [0, 1) per pair, fixed by (seed, query, title)."""
        key = str(self.seed if self.seed is not None else 0).encode("utf-8")
        digests = (
            hashlib.blake2b(f"{q}\x1f{t}".encode("utf-8"), digest_size=8, key=key).digest() for q, t in zip(queries, titles)
        )
        raw = np.fromiter((int.from_bytes(d, "big") >> 11 for d in digests), dtype=np.float64, count=len(queries))
        return raw / float(1 << 53)

    def describe(self) -> dict[str, Any]:
        """Row details of the table."""
        return {"settings": f"seed={self.seed}", "params": None, "fit_seconds": 0.0}
