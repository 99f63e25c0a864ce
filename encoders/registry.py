"""Towers by name, each with its default config: a new model is one module plus one line here."""
from __future__ import annotations

from typing import Any

from torch import nn

from encoders.bilstm import BiLSTMTower
from encoders.clsm import CLSMTower
from encoders.dssm import DSSMTower
from encoders.lstm import LSTMTower
from encoders.rnn import RNNTower
from pipeline.errors import ConfigError

#: name -> tower class; each class holds ``DEFAULTS`` (its config) and ``LABEL`` (its display name).
TOWERS: dict[str, type[nn.Module]] = {
    "lstm": LSTMTower,
    "rnn": RNNTower,
    "bilstm": BiLSTMTower,
    "dssm": DSSMTower,
    "clsm": CLSMTower,
}

#: The config key shown in a model's display name (Table IV's row labels).
_SIZE_KEYS = {"lstm": "ncell", "bilstm": "ncell", "rnn": "nhid", "dssm": "nhid", "clsm": "win"}


def tower_class(name: str) -> type[nn.Module]:
    """The tower class registered as ``name``."""
    if name not in TOWERS:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(TOWERS)}")
    return TOWERS[name]


def resolve_config(name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full config of tower ``name``: its defaults updated by ``config`` (unknown keys refused)."""
    defaults: dict[str, Any] = dict(tower_class(name).DEFAULTS)  # type: ignore[attr-defined]
    unknown = sorted(set(config or {}) - set(defaults))
    if unknown:
        raise ConfigError(f"model {name!r} has no setting {', '.join(unknown)}; known: {', '.join(sorted(defaults))}")
    resolved = {**defaults, **(config or {})}
    return {k: _coerce(name, k, v, type(defaults[k])) for k, v in resolved.items()}


def _coerce(name: str, key: str, value: Any, kind: type) -> Any:
    """``value`` as the type of the default (strings such as MLflow params are parsed)."""
    if kind is bool and isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0"):
            raise ConfigError(f"model {name!r}: {key}={value!r} is not a boolean")
        return value.lower() in ("true", "1")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"model {name!r}: {key}={value!r} is not a {kind.__name__}") from None


def build_tower(name: str, vocab_size: int, **config: Any) -> nn.Module:
    """A fresh tower ``name`` over ``vocab_size`` trigrams; ``.config`` holds its full config."""
    resolved = resolve_config(name, config)
    tower = tower_class(name)(vocab_size, **resolved)
    tower.config = resolved
    tower.model_type = name
    return tower


def display_name(name: str, config: dict[str, Any] | None = None) -> str:
    """A Table IV style label, e.g. ``LSTM-RNN (ncell=96)``."""
    resolved = resolve_config(name, config)
    key = _SIZE_KEYS[name]
    size = f"{resolved['nhid']}/{resolved['nout']}" if name == "dssm" else str(resolved[key])
    label = tower_class(name).LABEL  # type: ignore[attr-defined]
    return f"{label} ({'nhid' if name == 'dssm' else key}={size})"


def param_count(module: nn.Module) -> int:
    """Number of trainable parameters of ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
