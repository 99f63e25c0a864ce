"""Click simulator: turns the judged training pairs into realistic search-impression logs.

It reads only ``judgments_train.csv`` (Settings.train_judgments), never the dev set. Each day:

* people (a pool of users with a Zipf-like activity skew) open sessions at times following a
  daily rhythm; a session holds a geometric number of searches separated by think time;
* each search issues a query drawn from a Zipf popularity over the training queries (which
  query is popular is a seeded shuffle);
* an imperfect ranker orders the query's judged titles by mean relevance + a fixed error per
  (query, title) + a small per-search jitter, and shows the top ``max_results``;
* clicks follow a position-based model: P(click) = P(examined | rank) * P(attractive | title),
  examination ``exam_top * rank ** -exam_decay``, attractiveness rising with the human grade and
  perturbed per (query, title) on the logit scale (so bad titles get some clicks and excellent
  ones are sometimes skipped);
* a few bots fire a search every 1-4 seconds and click every result or none;
* a few malformed lines and duplicated (retried) impressions are written, as real engines do.

Randomness comes from numpy Generators seeded by ``(seed, purpose)`` and ``(seed, date)``: the
same seed gives byte-identical files, and a day's content does not depend on the start date.
This module holds the knobs and writes the landing partitions; the model itself is
:mod:`pipeline.click_model`.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

import pyarrow as pa

from pipeline.click_model import ClickModel, load_corpus, simulate_day
from pipeline.clickstats import click_stats, trec_session_stats
from pipeline.config import Settings
from pipeline.defaults import SEED
from pipeline.errors import ConfigError
from pipeline.formats.writers import FORMATS, encode_landing
from pipeline.ingest import landing_prefix
from pipeline.store import Store

log = logging.getLogger(__name__)
#: Share of a day's sessions starting in each hour (UTC): low at night, peaks at noon and evening.
DIURNAL = (1, 0.6, 0.4, 0.3, 0.3, 0.5, 1, 2, 3, 4, 4.5, 5, 5.5, 5, 4.5, 4.5, 5, 5.5, 6, 6.5, 6, 5, 3.5, 2)


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
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(f"simulator parameter {name}={getattr(self, name)!r} is out of range")
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


def simulate(
    settings: Settings,
    start: dt.date,
    days: int,
    seed: int = SEED,
    params: SimParams | None = None,
    fmt: str = "jsonl",
) -> dict[str, Any]:
    """Write ``days`` landing partitions from ``start``; counts, files and click stats vs TREC 2013."""
    params = (params or SimParams()).validate()
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if days < 1:
        raise ConfigError(f"--days must be at least 1, got {days}")
    store = Store.from_settings(settings)
    model = ClickModel(load_corpus(settings), params, seed)
    totals: dict[str, int] = {}
    partitions, human_tables, issued = [], [], set()
    for offset in range(days):
        day = start + dt.timedelta(days=offset)
        simulated = simulate_day(model, day)
        partitions.append(_write_partition(store, day, fmt, encode_landing(simulated.rows, simulated.corruptions, fmt)))
        for key, value in simulated.counts.items():
            totals[key] = totals.get(key, 0) + value
        human_tables.append(simulated.human)
        issued.update(simulated.human_queries.tolist())
        log.info("simulate %s: %d lines", day.isoformat(), simulated.counts["lines"])
    return {
        "start": start.isoformat(),
        "days": days,
        "seed": seed,
        "format": fmt,
        **totals,
        "queries_issued": len(issued),
        "queries_available": len(model.corpus.queries),
        "partitions": partitions,
        "params": asdict(params),
        "stats": {"simulated": click_stats(pa.concat_tables(human_tables)), "trec2013": trec_session_stats(settings.trec_session_xml)},
    }


def _write_partition(store: Store, day: dt.date, fmt: str, data: bytes) -> str:
    """Replace the day's landing partition with one file ``part-0.<fmt>``."""
    prefix = landing_prefix(day)
    target = f"{prefix}/part-0.{fmt}"
    uri = store.write_bytes(target, data)
    for stale in store.list_files(prefix):
        if stale != target:
            store.delete(stale)
    return uri
