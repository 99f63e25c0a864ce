"""The knobs of the click simulator (:class:`SimParams`), checked and overridable from ``NAME=VALUE`` texts."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from pipeline.core.errors import ConfigError

#: Share of a day's sessions starting in each hour (UTC): low at night, peaks at noon and evening.
DIURNAL = (1, 0.6, 0.4, 0.3, 0.3, 0.5, 1, 2, 3, 4, 4.5, 5, 5.5, 5, 4.5, 4.5, 5, 5.5, 6, 6.5, 6, 5, 3.5, 2)


#: The most days one call simulates (ten years): a documented hard limit.
MAX_DAYS = 3660
#: Hard limits of the knobs that size the output (one simulated day stays under ~1 GB of landing logs).
LIMITS = {"searches_per_day": 1_000_000, "users": 100_000_000, "max_results": 100, "bots_per_day": 10_000,
          "bot_searches_max": 100_000, "malformed_per_day": 100_000}


@dataclass(frozen=True)
class SimParams:
    """Knobs of the simulator; the defaults give ~2,600 searches (~14,500 rows) a day."""

    searches_per_day: int = 2500  # searches by people per day
    users: int = 8000  # size of the pool of people
    user_activity_exponent: float = 0.8  # Zipf exponent of how often each person searches
    query_zipf_exponent: float = 0.8  # Zipf exponent of query popularity
    searches_per_session: float = 1.8  # mean searches in a session (geometric)
    think_seconds: float = 45.0  # mean think time between searches of a session (exponential) ...
    min_gap_seconds: float = 8.0  # ... added to this minimum
    hourly_weights: tuple[float, ...] = DIURNAL  # 24 relative weights of session start hours (UTC)
    max_results: int = 10  # results shown per search (the query's judged titles, best first)
    ranker_noise: float = 0.5  # std of the ranker's fixed error per (query, title), relevance units
    ranker_jitter: float = 0.15  # std of the ranker's extra error per search
    exam_top: float = 0.6  # probability that the first result is examined
    exam_decay: float = 0.6  # examination falls as rank ** -exam_decay
    attract_by_grade: tuple[float, ...] = (0.1, 0.25, 0.45, 0.65)  # P(click | examined) by grade 0-3
    attract_noise: float = 0.6  # std of the per-(query, title) logit noise on attractiveness
    bots_per_day: int = 2  # bot users per day
    bot_searches_min: int = 40  # searches of one bot in a day: uniform between min ...
    bot_searches_max: int = 90  # ... and max
    bot_gap_min_seconds: float = 1.0  # seconds between bot searches: uniform between min ...
    bot_gap_max_seconds: float = 4.0  # ... and max
    malformed_per_day: int = 3  # malformed lines per day (truncated, wrong type, missing field)
    duplicate_rate: float = 0.002  # share of searches whose rows are written twice (retries)
    # The catalogue feed (pipeline.simulate.catalog_feed): searches show only the products live that day.
    catalog_feed: int = 1  # 1: also write landing/catalog/dt=D/ (a snapshot the first day, then deltas); 0: off
    catalog_launch_share: float = 0.02  # share of products absent from the first snapshot, launched on a later day
    catalog_retire_share: float = 0.01  # share of products retired on a later day
    catalog_edit_share: float = 0.01  # share of products whose title is edited (a word appended) on a later day

    def validate(self) -> "SimParams":
        """Self, or a ConfigError naming the first bad knob."""
        checks = {
            "searches_per_day": self.searches_per_day >= 1,
            "users": self.users >= 1,
            "searches_per_session": self.searches_per_session >= 1,
            "hourly_weights": len(self.hourly_weights) == 24 and min(self.hourly_weights) >= 0 < sum(self.hourly_weights),
            "max_results": self.max_results >= 1,
            "exam_top": 0 < self.exam_top <= 1,
            "attract_by_grade": len(self.attract_by_grade) == 4 and all(0 < a < 1 for a in self.attract_by_grade),
            "bot_searches_max": 0 <= self.bot_searches_min <= self.bot_searches_max,
            "bot_gap_max_seconds": 0 < self.bot_gap_min_seconds <= self.bot_gap_max_seconds,
            "duplicate_rate": 0 <= self.duplicate_rate <= 1,
            "catalog_feed": self.catalog_feed in (0, 1),
            "catalog_launch_share": 0 <= self.catalog_launch_share <= 1,
            "catalog_retire_share": 0 <= self.catalog_retire_share <= 1,
            "catalog_edit_share": 0 <= self.catalog_edit_share <= 1,
        }
        for f in fields(self):
            values = getattr(self, f.name) if isinstance(getattr(self, f.name), tuple) else (getattr(self, f.name),)
            if not all(math.isfinite(x) for x in values):
                raise ConfigError(f"simulator parameter {f.name}={getattr(self, f.name)!r} is not a finite number")
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"simulator parameter {name}={getattr(self, name)!r} is out of range")
        for name, limit in LIMITS.items():
            if getattr(self, name) > limit:
                raise ConfigError(f"simulator parameter {name}={getattr(self, name)!r} is above its limit {limit:,}")
        for f in fields(self):
            if isinstance(getattr(self, f.name), (int, float)) and getattr(self, f.name) < 0:
                raise ConfigError(f"simulator parameter {f.name} must not be negative")
        return self

    def with_overrides(self, overrides: dict[str, str]) -> "SimParams":
        """A copy with ``name=value`` texts applied (tuples as comma-separated numbers)."""
        known = {f.name: getattr(self, f.name) for f in fields(self)}
        changes: dict[str, Any] = {}
        for name, text in overrides.items():
            if name not in known:
                raise ConfigError(f"unknown simulator parameter {name!r}; known: {', '.join(known)}")
            try:
                default = known[name]
                if isinstance(default, tuple):
                    changes[name] = tuple(float(v) for v in text.split(","))
                else:
                    changes[name] = type(default)(text)
            except ValueError:
                kind = "numbers" if isinstance(known[name], tuple) else type(known[name]).__name__
                raise ConfigError(f"simulator parameter {name}: {text!r} is not of type {kind}") from None
        return SimParams(**{**known, **changes}).validate()
