"""The profiles of the chain: what one run trains and compares, declared once for both front doors.

``deepsent run --profile NAME`` runs a profile in process; the retrain DAG offers the same names
as its ``profile`` param, and its other training params, when set, override the profile's grid
(:func:`resolve_profile`). Torch-free: DAG files import it at parse time.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from eval.baseline_catalog import profile_baselines
from pipeline.core.defaults import GAMMA, NEGATIVE_SOURCES, NEGATIVES, PATIENCE
from pipeline.core.errors import ConfigError

RANDOM, SKIPPED, MIXED, BM25, ANN = NEGATIVE_SOURCES


@dataclass(frozen=True)
class ModelSpec:
    """One model of a profile's grid: tower type, tower config, negatives n, epochs, where negatives come from."""

    model: str
    tower: dict[str, Any] = field(default_factory=dict)
    negatives: int = NEGATIVES
    epochs: int = 10
    negative_source: str = RANDOM

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (an XCom value, a mapped task's argument)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Profile:
    """What one run of the chain trains, compares and with which recipe."""

    name: str
    days: int  # simulated days of landing logs (``deepsent run``; a real engine fills the landing area itself)
    models: tuple[ModelSpec, ...]
    baselines: tuple[str, ...]
    patience: int = PATIENCE
    gamma: float = GAMMA
    lr: float | None = None  # None = each tower's own step size
    batch_size: int | None = None  # None = the trainer's


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        name="quick",
        days=30,
        models=(ModelSpec("lstm", {"ncell": 96}, 4, epochs=8), ModelSpec("dssm", {}, 4, epochs=8)),
        baselines=profile_baselines("quick"),
        patience=3,
    ),
    "full": Profile(
        name="full",
        days=30,
        models=(
            ModelSpec("dssm", {}, 4, 30),
            ModelSpec("clsm", {"win": 1}, 4, 30),
            ModelSpec("clsm", {"win": 3}, 4, 30),
            ModelSpec("clsm", {"win": 5}, 4, 30),
            ModelSpec("rnn", {"nhid": 288}, 4, 30),
            ModelSpec("lstm", {"ncell": 32}, 4, 30),
            ModelSpec("lstm", {"ncell": 64}, 4, 30),
            ModelSpec("lstm", {"ncell": 96}, 2, 30),
            ModelSpec("lstm", {"ncell": 96}, 4, 30),
            ModelSpec("lstm", {"ncell": 96}, 6, 30),
            ModelSpec("lstm", {"ncell": 96}, 8, 30),
            ModelSpec("lstm", {"ncell": 96}, 4, 30, negative_source=SKIPPED),
            ModelSpec("lstm", {"ncell": 96}, 4, 30, negative_source=MIXED),
            ModelSpec("lstm", {"ncell": 96}, 4, 30, negative_source=BM25),  # trained for retrieval (mined negatives)
            ModelSpec("bilstm", {"ncell": 96}, 4, 30),
            ModelSpec("minilm", {"in_batch": True}, 4, 1),  # ~1.5 h an epoch on 2 CPU cores; minutes on a GPU
        ),
        baselines=profile_baselines("full"),
    ),
}
DEFAULT_PROFILE = "quick"


def profile_named(name: str) -> Profile:
    """The declared profile ``name``; a clear error naming the known ones."""
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    profile = PROFILES[name]
    if not any(spec.model == "lstm" for spec in profile.models):
        raise ConfigError(f"profile {name!r} trains no LSTM-RNN, and the ensemble it ships is built on one")
    return profile


def _grid(models: list[str], sizes: list[int], negatives: int, epochs: int) -> tuple[ModelSpec, ...]:
    """Every model type, at every size for a recurrent tower (its SPEC's first size key)."""
    from encoders.towers.tower_catalog import towers

    grid = []
    for model in models:
        spec = towers()[model]
        tower_sizes = [{spec.size_keys[0]: n} for n in sizes] if spec.recurrent else [{}]
        grid += [ModelSpec(model, size, negatives, epochs) for size in tower_sizes]
    return tuple(grid)


def resolve_profile(params: Mapping[str, Any]) -> Profile:
    """The profile a retrain's params ask for: ``profile`` with each override that is set applied.

    ``models`` and ``ncell`` replace the grid (every model, every size of a recurrent one);
    ``negatives`` and ``epochs`` then apply to every grid point; ``gamma``, ``learning_rate``,
    ``batch_size``, ``patience`` and ``baselines`` replace the profile's.
    """
    profile = profile_named(params.get("profile") or DEFAULT_PROFILE)
    models = list(profile.models)
    if params.get("models") or params.get("ncell"):
        first = profile.models[0]
        sizes = params.get("ncell") or sorted({v for m in profile.models for v in m.tower.values() if isinstance(v, int)}) \
            or [96]
        models = list(_grid(params.get("models") or sorted({m.model for m in profile.models}), sizes,
                            first.negatives, first.epochs))
    changes = {key: params[key] for key in ("negatives", "epochs") if params.get(key) is not None}
    if changes:
        models = [dataclasses.replace(m, **changes) for m in models]
    overrides = {field_name: params[key] for key, field_name in (
        ("gamma", "gamma"), ("learning_rate", "lr"), ("batch_size", "batch_size"), ("patience", "patience"))
        if params.get(key) is not None}
    if params.get("baselines") is not None:
        overrides["baselines"] = tuple(params["baselines"])
    resolved = dataclasses.replace(profile, models=tuple(models), **overrides)
    if not any(spec.model == "lstm" for spec in resolved.models):
        raise ConfigError("the grid trains no LSTM-RNN, and the ensemble the chain ships is built on one")
    return resolved
