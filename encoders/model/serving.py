"""The served model: an MLflow pyfunc that turns texts into sentence vectors (MLflow "models from code").

MLflow copies this file into every logged model and runs it when the model loads, so it only
defines :class:`TextsToVectors` and hands it to ``mlflow.models.set_model``; import
:mod:`encoders.model.pyfunc` (which logs it) everywhere else. The model's ``saved_model`` artifact is
the ``encoders.model.saved_model`` folder (config.json + vocab.json + weights.pt, vocabulary inside),
and the project's ``encoders`` and ``pipeline`` packages travel with it as code, so::

    mlflow.pyfunc.load_model("models:/deepsent-ranker@champion").predict(["cordless drill"])

returns one float32 vector per text from the query tower (``params={"side": "doc"}`` for titles).
"""
from __future__ import annotations

from typing import Any

import mlflow.pyfunc
from mlflow.models import set_model

from encoders.model.saved_model import SAVED_MODEL

SIDES = ("query", "doc")


class TextsToVectors(mlflow.pyfunc.PythonModel):
    """A trained two-tower model as a pyfunc: texts in, ``(N, d)`` float32 vectors out."""

    def load_context(self, context: Any) -> None:
        """Rebuild the model and its vocabulary from the ``saved_model`` artifact, on the CPU."""
        from encoders.model.saved_model import load_saved_model
        from encoders.model.text_encoder import TextEncoder

        saved = load_saved_model(context.artifacts[SAVED_MODEL])
        self.encoder = TextEncoder(saved.model, saved.vocab, saved.max_words)

    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]  # MLflow reads hints as a schema
        """Vectors of ``model_input`` (a list of texts, or a one-column DataFrame) from the ``side`` tower."""
        import numpy as np

        side = (params or {}).get("side", "query")
        if side not in SIDES:
            raise ValueError(f"side must be one of {', '.join(SIDES)}, got {side!r}")
        if getattr(model_input, "ndim", 1) == 2:  # a DataFrame (or 2-d array): one column of texts only
            if model_input.shape[1] != 1:
                raise ValueError(f"expected one column of texts, got {model_input.shape[1]} columns")
            texts = model_input.iloc[:, 0].tolist() if hasattr(model_input, "iloc") else list(model_input[:, 0])
        elif isinstance(model_input, (str, bytes, dict)) or not hasattr(model_input, "__iter__"):
            raise ValueError(f"expected a list of texts, got a {type(model_input).__name__}")
        elif isinstance(model_input, (set, frozenset)):  # its order is the hash order: rows would match no input
            raise ValueError(f"expected an ordered list of texts, got a {type(model_input).__name__}: a set has no "
                             "order, so no vector could be matched to its text; pass a list (e.g. sorted(texts))")
        else:  # a list, tuple, Series or 1-d array
            texts = list(model_input)
        bad = next(((i, t) for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise ValueError(f"input {bad[0]} is a {type(bad[1]).__name__}, not a text: every input must be a string")
        return np.asarray(self.encoder.encode(texts, side), dtype=np.float32)


set_model(TextsToVectors())
