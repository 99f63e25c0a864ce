"""Towers by name: the catalog's declarations (``encoders/towers/tower_catalog.py``) turned into modules.

A new model is one module in ``encoders/towers/`` with a literal ``SPEC`` and its class; nothing here
changes. This module imports torch; code that only needs names, defaults or labels uses the
torch-free catalog.
"""
from __future__ import annotations

import importlib
from typing import Any

from torch import nn

from encoders.towers.tower_catalog import tower_names, tower_spec


def tower_class(name: str) -> type[nn.Module]:
    """The tower class registered as ``name``."""
    spec = tower_spec(name)
    return getattr(importlib.import_module(spec.module), spec.cls)


def resolve_config(name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full config of tower ``name``: its defaults updated by ``config`` (unknown keys and bad values refused)."""
    return tower_spec(name).resolve(config)


def build_tower(name: str, vocab_size: int, **config: Any) -> nn.Module:
    """A fresh tower ``name`` over ``vocab_size`` trigrams; ``.config`` holds its full config."""
    resolved = resolve_config(name, config)
    tower = tower_class(name)(vocab_size, **resolved)
    tower.config = resolved
    tower.model_type = name
    return tower


def display_name(name: str, config: dict[str, Any] | None = None) -> str:
    """A Table IV style label, e.g. ``LSTM-RNN (ncell=96)``."""
    return tower_spec(name).display_name(config)


def param_count(module: nn.Module) -> int:
    """Number of trainable parameters of ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


__all__ = ["build_tower", "display_name", "param_count", "resolve_config", "tower_class", "tower_names"]
