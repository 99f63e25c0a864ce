"""Component declarations read from source files without importing them (towers, baselines).

A component module holds one module-level ``SPEC = <SpecClass>(key=literal, ...)``. :func:`read_specs`
finds those assignments with :mod:`ast` and builds the spec objects from the literal arguments,
so the list of components, their labels and defaults are known without loading torch, gensim or
sentence-transformers (the CLI's ``--help`` and Airflow's DAG parsing stay fast). The layer that
owns the components (``encoders/towers/tower_catalog.py``, ``eval/baseline_catalog.py``) says which folder to read.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, TypeVar

from pipeline.core.errors import ConfigError

Spec = TypeVar("Spec")


def literal_spec(path: Path, spec_cls: type[Spec], package: str) -> Spec | None:
    """The ``SPEC = spec_cls(...)`` of one source file (``module`` set to ``package.<stem>``), or None."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "SPEC" and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == spec_cls.__name__):
            if node.value.args:
                raise ConfigError(f"{path}: SPEC must use keyword arguments only")
            try:
                kwargs: dict[str, Any] = {kw.arg: ast.literal_eval(kw.value) for kw in node.value.keywords if kw.arg}
            except ValueError:
                raise ConfigError(f"{path}: every argument of SPEC must be a literal") from None
            return spec_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()},
                            module=f"{package}.{path.stem}")
    return None


def read_specs(directory: Path, spec_cls: type[Spec], package: str) -> dict[str, Spec]:
    """Every ``spec_cls`` SPEC declared by the ``*.py`` files of ``directory``, by name, in ``order``."""
    found: dict[str, Any] = {}
    for path in sorted(directory.glob("*.py")):
        spec = literal_spec(path, spec_cls, package)
        if spec is None:
            continue
        name = spec.name  # type: ignore[attr-defined]
        if name in found:
            raise ConfigError(f"{spec_cls.__name__} {name!r} is declared twice ({found[name].module}, {spec.module})")  # type: ignore[attr-defined]
        found[name] = spec
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))
