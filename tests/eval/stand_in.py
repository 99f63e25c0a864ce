"""A stand-in trained model for comparison tests: a hashed bag of words behind the EncodesTexts interface."""
from __future__ import annotations

import hashlib

import numpy as np


class StandInEncoder:
    """Test double of what ``encoders.model.loading.load_encoder`` returns, minus torch."""

    label = "stand-in"
    config = {"model": "bag-of-words", "dim": 64}
    param_count = 1234
    run_id = "0123456789abcdef"

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        """64-d word-hash count vectors of ``texts`` (the same for both sides)."""
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                vectors[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        return vectors
