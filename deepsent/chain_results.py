"""What one run of the chain is given (:class:`ChainRun`) and the typed results of its data stages.

The model stages return their own results (``TrainResult``, ``EnsembleResult``, ``ShipChoice``,
``PromotionResult``, ``EmbedResult``, ``CompareResult``); these are the results of the stages before
training and of publishing. Torch-free.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from deepsent.profiles import Profile
from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.core.results import StageResult

class ChainError(ConfigError):
    """A chain that cannot run: a stage asked for a result not produced, or the declaration is inconsistent."""


#: The first simulated day of the demo's landing logs.
SIMULATION_START = dt.date(2026, 1, 1)
#: A champion refused this many times in a row, or older than this many days, is reported stale.
STALE_AFTER_REFUSALS, STALE_AFTER_DAYS = 3, 30


@dataclass(frozen=True)
class ChainRun:
    """One run of the chain: its settings, profile and options (both front doors build one)."""

    settings: Settings
    profile: Profile
    seed: int = SEED
    simulate_days: int = 0  # ``deepsent run``: the profile's days; the DAG: none, unless its params ask
    simulate_start: dt.date = SIMULATION_START
    ingest_dates: tuple[dt.date, ...] = ()  # when nothing is simulated: the days to (re)ingest
    judgments: str | None = None  # the reported judged set (None = the dev set)
    judgments_format: str | None = None
    gate_judgments: str | None = None  # None = the settings' gate set (eval.decisions.gate_set)
    force_promotion: bool = False
    stale_after_refusals: int = STALE_AFTER_REFUSALS
    stale_after_days: float = STALE_AFTER_DAYS
    tags: dict[str, str] = field(default_factory=dict)
    resume: bool = False
    report_name: str | None = None

    @property
    def gate(self) -> str:
        """The gate setting every decision of this run reads: the run's own, else the settings' (``gate-slice``,
        ``clicks`` or a judged file)."""
        return self.gate_judgments or self.settings.gate_judgments


@dataclass(frozen=True)
class Landing(StageResult):
    """The simulated landing partitions (none when the run simulates nothing)."""

    dates: list[str]
    lines: int
    partitions: list[str]
    summary: str = ""


@dataclass(frozen=True)
class Ingested(StageResult):
    """The days ingested and the row counts: rows read = accepted + quarantined + duplicates + bot rows."""

    dates: list[str]
    counts: dict[str, int]
    summary: str = ""


@dataclass(frozen=True)
class Pairs(StageResult):
    """The clicked pairs of every ingested day, split train/valid by query."""

    train_pairs: int
    valid_pairs: int
    outputs: dict[str, str]
    summary: str = ""


@dataclass(frozen=True)
class Mined(StageResult):
    """The negatives mined for each mined source of the grid (``mined/<source>/``): its counts per split."""

    sources: dict[str, dict[str, Any]]
    summary: str = ""


@dataclass(frozen=True)
class FeatureVersions(StageResult):
    """The feature versions built, by negatives key (``4``, ``4 skipped``), and the ship lists' version."""

    versions: dict[str, str]
    ship: str
    summary: str = ""

    def version(self, negatives: int, source: str) -> str:
        """The version built with ``negatives`` negatives from ``source``."""
        key = negatives_key(negatives, source)
        if key not in self.versions:
            raise ChainError(f"no features with n={key} were built by the featurize stage ({', '.join(self.versions)})")
        return self.versions[key]


@dataclass(frozen=True)
class Champion(StageResult):
    """The model the index DAG refreshes the index of: the ``model_uri`` param, else the latest promoted champion."""

    model_uri: str
    summary: str = ""


@dataclass(frozen=True)
class Published(StageResult):
    """The table files copied to ``reports/latest/``, and the comparison they come from."""

    published: dict[str, str]
    report_name: str
    mlflow_run_id: str
    summary: str = ""


def negatives_key(n: int, source: str) -> str:
    """How features and runs are labelled: ``4``, or ``4 skipped`` when the negatives are not the paper's random."""
    return f"{n}" + ("" if source == "random" else f" {source}")

