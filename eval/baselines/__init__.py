"""Ranking baselines, one module each, registered by name in :data:`base.BASELINES` on import.

skip-thought lives in ``skipthought.py`` (built separately) and is imported when present;
MiniLM registers itself only when its optional packages are installed.
"""
from __future__ import annotations

import importlib

from eval.baselines import bm25, doc2vec, minilm, plsa, random_order, ulm  # noqa: F401  (registration)
from eval.baselines.base import BASELINES

try:
    importlib.import_module("eval.baselines.skipthought")
except ModuleNotFoundError as exc:  # only a missing skipthought module is tolerated
    if exc.name != "eval.baselines.skipthought":
        raise

#: Baselines of a default comparison, in table order (random is printed last, as the floor).
DEFAULT_BASELINES = ("bm25", "ulm", "plsa", "doc2vec", "skipthought", "random", "minilm")

__all__ = ["BASELINES", "DEFAULT_BASELINES"]
