"""Logging a trained model as the MLflow pyfunc that serves it (texts -> vectors).

The pyfunc is :mod:`encoders.model.serving` (models from code, nothing pickled) with the
``encoders.model.saved_model`` folder as its ``saved_model`` artifact, the ``encoders`` and ``pipeline``
packages as ``code_paths`` (so a fresh process needs no deepsent install), pinned pip
requirements (``torch==2.13.0``, never a local ``+cpu`` build tag), a signature (float32
vectors out, a ``side`` parameter; the input, strings only, is checked by the model itself) and an input
example.
"""
from __future__ import annotations

import shutil
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

from encoders.model.saved_model import SAVED_MODEL, load_saved_model, save_model
from encoders.model.text_encoder import TextEncoder
from pipeline.core.config import PROJECT_ROOT

SERVING_FILE = Path(__file__).with_name("serving.py")
CODE_PACKAGES = ("encoders", "pipeline")
#: What loading and running the pyfunc imports; pinned to the versions installed here.
REQUIREMENTS = ("mlflow", "torch", "numpy", "pandas", "pyarrow")
INPUT_EXAMPLE = ["cordless drill", "ceiling fan with light"]


def pinned_requirements() -> list[str]:
    """``name==version`` of every requirement, without local build tags (``2.13.0+cpu`` -> ``2.13.0``)."""
    return [f"{name}=={version(name).split('+')[0]}" for name in REQUIREMENTS]


def _stage_code(folder: Path) -> list[str]:
    """Copies of the project packages the pyfunc imports (no caches); their paths."""
    paths = []
    for package in CODE_PACKAGES:
        target = folder / package
        shutil.copytree(PROJECT_ROOT / package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        paths.append(str(target))
    return paths


def log_pyfunc(model: Any, vocab: Any, max_words: int | None, gamma: float | None, name: str) -> Any:
    """Log ``model`` in the active run as pyfunc ``name``; returns MLflow's ``ModelInfo`` (``model_uri``, ``model_id``)."""
    import mlflow
    from mlflow.models import ModelSignature, infer_signature

    with tempfile.TemporaryDirectory(prefix="deepsent-pyfunc-") as scratch, warnings.catch_warnings():
        # MLflow nags for predict() type hints; the signature below is explicit (hints would replace it)
        warnings.filterwarnings("ignore", message=".*type hints to the `predict` method", category=UserWarning)
        folder = save_model(model, vocab, max_words, Path(scratch, SAVED_MODEL), gamma)
        saved = load_saved_model(folder)  # a CPU copy: the trained model stays where it is
        example_output = TextEncoder(saved.model, saved.vocab, saved.max_words).encode(INPUT_EXAMPLE, "query")
        inferred = infer_signature(INPUT_EXAMPLE, example_output, params={"side": "query"})
        # no input schema: MLflow's enforcement of one string column would pass a wider DataFrame's first column
        # on silently; serving.py checks the input itself (strings only, one column) and refuses the rest
        signature = ModelSignature(inputs=None, outputs=inferred.outputs, params=inferred.params)
        return mlflow.pyfunc.log_model(
            name=name, python_model=str(SERVING_FILE), artifacts={SAVED_MODEL: str(folder)},
            code_paths=_stage_code(Path(scratch, "code")), pip_requirements=pinned_requirements(),
            signature=signature, input_example=INPUT_EXAMPLE)
