"""The baseline catalog: every ranking baseline declares itself once, in a literal ``SPEC`` beside its class.

Each module of ``eval/baselines/`` that provides a baseline holds ``SPEC = BaselineSpec(...)``
(name, table label, class name, table order, whether it may be the significance reference, the
optional extra that provides its packages, and its comparison options per main-job profile).
The catalog reads these declarations without importing the modules (``pipeline/core/spec_reader.py``),
so the CLI, the DAG params and the runner profiles know every baseline without loading gensim,
torch or sentence-transformers; :func:`baseline_class` imports the one asked for.

A new baseline is therefore one file: its ``SPEC`` and its scorer class.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipeline.core.errors import ConfigError
from pipeline.core.spec_reader import read_specs

BASELINES_DIR = Path(__file__).resolve().parent / "baselines"


@dataclass(frozen=True)
class BaselineSpec:
    """What a baseline declares about itself (import-free).

    Attributes:
        name: registered name (``--baselines NAME[:key=value...]``, DAG enum).
        label: row label of the comparison table.
        cls: class name of the scorer in its module.
        order: position in the default comparison and in lists.
        reference: True when it may be the significance reference (one of the paper's baselines).
        floor: True for the random floor (printed last).
        extra: the optional install extra that provides its packages ("" = always installed).
        profiles: comparison options per main-job profile, e.g. ``{"quick": "topics=100"}``.
        module: import path of the module (filled in by the catalog).
    """

    name: str
    label: str
    cls: str
    order: int = 100
    reference: bool = True
    floor: bool = False
    extra: str = ""
    profiles: dict[str, str] = field(default_factory=dict)
    module: str = ""

    def spec_for(self, profile: str) -> str:
        """The comparison spec of this baseline in a main-job profile, e.g. ``plsa:topics=100``."""
        options = self.profiles.get(profile, "")
        return f"{self.name}:{options}" if options else self.name


@lru_cache(maxsize=1)
def baselines() -> dict[str, BaselineSpec]:
    """Every baseline declared in ``eval/baselines/``, by name, in table order."""
    return read_specs(BASELINES_DIR, BaselineSpec, "eval.baselines")


def baseline_names() -> list[str]:
    """Names of every declared baseline: the default comparison, CLI help and DAG enum."""
    return list(baselines())


def baseline_spec(name: str) -> BaselineSpec:
    """The declaration of baseline ``name``; a clear error for an unknown name."""
    specs = baselines()
    if name not in specs:
        raise ConfigError(f"unknown baseline {name!r}; available: {', '.join(specs)}")
    return specs[name]


def profile_baselines(profile: str) -> tuple[str, ...]:
    """The comparison specs of every baseline in a main-job profile (``quick`` or ``full``)."""
    return tuple(spec.spec_for(profile) for spec in baselines().values())


def unavailable_reason(name: str) -> str:
    """Why baseline ``name`` cannot run here ("" when it can): its optional packages are missing."""
    module = importlib.import_module(baseline_spec(name).module)
    return str(getattr(module, "UNAVAILABLE_REASON", ""))


def baseline_class(name: str) -> Any:
    """The scorer class of baseline ``name`` (imports its module); refuses an unavailable one."""
    spec = baseline_spec(name)
    reason = unavailable_reason(name)
    if reason:
        raise ConfigError(reason)
    return getattr(importlib.import_module(spec.module), spec.cls)
