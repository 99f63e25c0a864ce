"""The tower catalog: every model declares itself once, in a literal ``SPEC`` beside its class.

A tower module in ``encoders/towers/`` holds a module-level ``SPEC = TowerSpec(...)`` whose arguments
are literals (name, label, default config, size keys, step size, recurrent or not). This module
reads those declarations from the source files with :mod:`ast`, without importing the modules,
so the CLI, the DAG files and the runner profiles get the list of models, their defaults and
their labels without loading torch. ``encoders/towers/tower_classes.py`` imports the modules themselves to
build towers, and a test checks that the imported ``SPEC`` equals what this catalog read.

A new model is therefore one file: its ``SPEC`` and its ``nn.Module`` class.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipeline.core.errors import ConfigError
from pipeline.core.spec_reader import read_specs

PACKAGE_DIR = Path(__file__).resolve().parent
#: The step size of eq. (6) for a tower whose SPEC names none (chosen on validation click pairs).
DEFAULT_LR = 0.1


@dataclass(frozen=True)
class TowerSpec:
    """What a tower declares about itself (torch-free).

    Attributes:
        name: registered name (``--model NAME``, DAG enum, MLflow ``deepsent-NAME``).
        label: Table IV row label, e.g. ``LSTM-RNN``.
        cls: class name of the tower in its module.
        defaults: the full default config; the class's ``__init__`` takes these keys.
        size_keys: config keys shown in the display name, e.g. ``("nhid", "nout")`` -> ``nhid=288/96``.
        lr: default step size, or None for :data:`DEFAULT_LR`.
        recurrent: True when the DAG's ``ncell`` grid sets ``size_keys[0]``.
        order: position in lists and help texts (the paper's Table IV reads LSTM first).
        inputs: what the tower reads: ``trigrams`` (word-hashed sentences, ``SentenceBatch``), ``text``
            (the sentences themselves, ``TextBatch``: a pretrained transformer tokenises them) or ``both``
            (``MixedBatch``: a tower assembled from trained towers, not trained by ``deepsent train``).
        optimizer: the default optimiser (``nesterov``: the paper's eq. 6; ``adam`` for fine-tuning).
        module: import path of the module (filled in by the catalog).
    """

    name: str
    label: str
    cls: str
    defaults: dict[str, Any] = field(default_factory=dict)
    size_keys: tuple[str, ...] = ()
    lr: float | None = None
    recurrent: bool = False
    order: int = 100
    inputs: str = "trigrams"
    optimizer: str = "nesterov"
    module: str = ""

    @property
    def trainable(self) -> bool:
        """False for a tower assembled from trained towers (``inputs="both"``): no SGD trains it."""
        return self.inputs != "both"

    @property
    def step_size(self) -> float:
        """The default step size of this tower."""
        return DEFAULT_LR if self.lr is None else self.lr

    def display_name(self, config: dict[str, Any] | None = None) -> str:
        """A Table IV style label, e.g. ``LSTM-RNN (ncell=96)`` or ``DSSM (nhid=288/96)``."""
        if not self.size_keys:
            return self.label
        resolved = self.resolve(config)
        size = "/".join(str(resolved[k]) for k in self.size_keys)
        return f"{self.label} ({self.size_keys[0]}={size})"

    def resolve(self, config: dict[str, Any] | None = None) -> dict[str, Any]:
        """The full config: the defaults updated by ``config``; unknown keys and bad values refused.

        Values are coerced to the type of the default (MLflow params come back as strings); an
        integer setting (a layer size, a window) must be at least 1, a float one above 0.
        """
        unknown = sorted(set(config or {}) - set(self.defaults))
        if unknown:
            raise ConfigError(f"model {self.name!r} has no setting {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(self.defaults))}")
        resolved = {**self.defaults, **(config or {})}
        return {k: self._checked(k, v, type(self.defaults[k])) for k, v in resolved.items()}

    def _checked(self, key: str, value: Any, kind: type) -> Any:
        """``value`` as ``kind``, within the range every tower setting of that kind must have."""
        if kind is bool:
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
                return value.lower() in ("true", "1")
            if isinstance(value, bool):
                return value
            raise ConfigError(f"model {self.name!r}: {key}={value!r} is not a boolean")
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ConfigError(f"model {self.name!r}: {key}={value!r} is not a {kind.__name__}") from None
        if (kind is int and number < 1) or (kind is float and not number > 0):
            bound = "at least 1" if kind is int else "above 0"
            raise ConfigError(f"model {self.name!r}: {key}={value!r} must be {bound}")
        return number


@lru_cache(maxsize=1)
def towers() -> dict[str, TowerSpec]:
    """Every tower declared in ``encoders/towers/``, by name, ordered by ``order`` (then name)."""
    return scan(PACKAGE_DIR)


def scan(directory: Path) -> dict[str, TowerSpec]:
    """The towers declared by the ``*.py`` files of ``directory`` (read, not imported)."""
    return read_specs(directory, TowerSpec, "encoders.towers")


def tower_names(inputs: str | None = None) -> list[str]:
    """Names of every declared tower; only those reading ``inputs`` when given."""
    return [name for name, spec in towers().items() if inputs is None or spec.inputs == inputs]


def trainable_tower_names() -> list[str]:
    """Names of the towers ``deepsent train`` trains (CLI choices, DAG enums): all but assembled ones."""
    return [name for name, spec in towers().items() if spec.trainable]


def tower_spec(name: str) -> TowerSpec:
    """The declaration of tower ``name``; a clear error for an unknown name."""
    specs = towers()
    if name not in specs:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(specs)}")
    return specs[name]


def tower_settings() -> dict[str, type]:
    """Every setting a trainable tower accepts, with its type (for command-line flags)."""
    settings: dict[str, type] = {}
    for spec in (s for s in towers().values() if s.trainable):
        for key, value in spec.defaults.items():
            settings.setdefault(key, type(value))
    return settings


def models_with(setting: str) -> list[str]:
    """The trainable towers that accept ``setting`` (for help texts)."""
    return [name for name, spec in towers().items() if spec.trainable and setting in spec.defaults]
