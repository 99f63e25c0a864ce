"""The served pyfunc embeds texts in the order they were given, and refuses inputs that have no order."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from encoders.model.serving import TextsToVectors


class _Lengths:
    """A stand-in encoder: each text's vector is its length, so a row shows which text it came from."""

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        return np.asarray([[len(text)] for text in texts], dtype=np.float32)


def _served() -> TextsToVectors:
    model = TextsToVectors()
    model.encoder = _Lengths()
    return model


@pytest.mark.parametrize("unordered", [{"drill", "cordless drill"}, frozenset({"drill", "fan"})])
def test_a_set_of_texts_is_refused_with_a_clear_error(unordered: Any) -> None:
    with pytest.raises(ValueError, match=f"expected an ordered list of texts, got a {type(unordered).__name__}: a set "
                                         "has no order"):
        _served().predict(None, unordered)


def test_rows_follow_the_order_of_the_texts() -> None:
    texts = ["cordless drill", "fan", "deck screws"]
    for given in (texts, tuple(texts), sorted({*texts})):
        rows = _served().predict(None, given)
        assert rows[:, 0].tolist() == [len(t) for t in given]
