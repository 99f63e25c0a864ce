"""Typed stage results: what a stage hands to the next one, to ``--json`` and to Airflow's XCom.

Every result is a frozen dataclass built on :class:`StageResult`: ``to_dict()`` gives the plain
JSON object the CLI prints with ``--json`` and a DAG task returns as its XCom value (the keys are
the field names), ``from_dict()`` rebuilds the result from it. Torch-free, so DAG files and the
CLI can import results without loading a model library.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, TypeVar

R = TypeVar("R", bound="StageResult")


def _plain(value: Any) -> Any:
    """JSON form of a value json cannot write: a numpy number's Python value, else its text (paths, dates)."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def to_json_safe(value: Any) -> Any:
    """``value`` as plain JSON types (dicts, lists, str, numbers, bools, None)."""
    return json.loads(json.dumps(value, default=_plain))


@dataclasses.dataclass(frozen=True)
class StageResult:
    """Base of the stage results: conversion to and from a plain JSON object."""

    def to_dict(self) -> dict[str, Any]:
        """The result as one JSON-safe object, one key per field (``--json``, XCom)."""
        return to_json_safe(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The result of a ``to_dict()`` object (fields with defaults may be missing, e.g. dropped from XCom)."""
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class FeatureSet(StageResult):
    """A version of the feature shards (``features/<version>/``): counts per split and the URIs written."""

    version: str
    counts: dict[str, Any]
    vocab_size: int
    vocab_version: str
    oov_share_dev: float | None
    uris: dict[str, Any]
