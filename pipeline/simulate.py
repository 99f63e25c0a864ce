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
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.clickstats import click_stats, trec_session_stats
from pipeline.config import Settings
from pipeline.defaults import SEED
from pipeline.errors import ConfigError
from pipeline.formats.writers import CORRUPTIONS, FORMATS, encode_landing
from pipeline.homedepot import iter_judgments
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


@dataclass(frozen=True)
class _Corpus:
    """The training judgments grouped by query: query q's titles are rows offsets[q]:offsets[q+1]."""

    queries: list[str]
    offsets: np.ndarray
    doc_ids: list[str]
    titles: list[str]
    relevance: np.ndarray
    grade: np.ndarray


def load_corpus(settings: Settings) -> _Corpus:
    """The training judgments (only them: the dev set is never read) grouped by query."""
    path = settings.train_judgments
    stat = path.stat() if path.exists() else None
    return _load_corpus(str(path), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)


@lru_cache(maxsize=2)
def _load_corpus(path: str, mtime_ns: int, size: int) -> _Corpus:
    """Cached per file version (path, mtime, size): re-reading 57k rows costs ~0.5 s."""
    by_query: dict[str, list[Any]] = {}
    for j in iter_judgments(path):
        by_query.setdefault(j.query_raw, []).append(j)
    rows = [j for group in by_query.values() for j in group]
    sizes = [len(group) for group in by_query.values()]
    return _Corpus(
        queries=list(by_query),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        doc_ids=[j.doc_id for j in rows],
        titles=[j.title_raw for j in rows],
        relevance=np.array([j.relevance for j in rows]),
        grade=np.array([j.label for j in rows], dtype=np.int64),
    )


class _Model:
    """Everything fixed for a seed: query popularity, ranker errors, attractiveness, user ids."""

    def __init__(self, corpus: _Corpus, params: SimParams, seed: int) -> None:
        rng = np.random.default_rng([seed, 0])
        n_queries = len(corpus.queries)
        popularity_rank = rng.permutation(n_queries) + 1
        self.query_p = _normalised(popularity_rank.astype(float) ** -params.query_zipf_exponent)
        self.ranker_score = corpus.relevance + rng.normal(0.0, params.ranker_noise, corpus.relevance.size)
        base = np.asarray(params.attract_by_grade)[corpus.grade]
        logit = np.log(base / (1 - base)) + rng.normal(0.0, params.attract_noise, base.size)
        self.attract = 1 / (1 + np.exp(-logit))
        self.user_p = _normalised(np.arange(1, params.users + 1, dtype=float) ** -params.user_activity_exponent)
        self.hour_p = _normalised(np.asarray(params.hourly_weights, dtype=float))
        self.users = [_stable_id("u", seed, "user", i) for i in range(params.users)]
        self.corpus, self.params, self.seed = corpus, params, seed


def _normalised(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum()


def _stable_id(prefix: str, *parts: object) -> str:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=6).hexdigest()
    return f"{prefix}{digest}"


@dataclass
class _Searches:
    """One day's searches, sorted by time: seconds after midnight, who, and which query."""

    seconds: np.ndarray
    users: list[str]
    sessions: list[str]
    impressions: list[str]
    query: np.ndarray
    bot_mode: np.ndarray  # -1 a person, 0 a bot that never clicks, 1 a bot that clicks everything

    @staticmethod
    def concat(parts: list["_Searches"]) -> "_Searches":
        """All parts merged and sorted by time (stable, so ties keep their order)."""
        seconds = np.concatenate([p.seconds for p in parts])
        order = np.argsort(seconds, kind="stable")
        pick = order.tolist()
        users = [u for p in parts for u in p.users]
        sessions = [s for p in parts for s in p.sessions]
        impressions = [i for p in parts for i in p.impressions]
        return _Searches(
            seconds=seconds[order],
            users=[users[i] for i in pick],
            sessions=[sessions[i] for i in pick],
            impressions=[impressions[i] for i in pick],
            query=np.concatenate([p.query for p in parts])[order],
            bot_mode=np.concatenate([p.bot_mode for p in parts])[order],
        )


def _human_searches(model: _Model, rng: np.random.Generator, day: dt.date) -> _Searches:
    params, n = model.params, model.params.searches_per_day
    lengths = rng.geometric(1 / params.searches_per_session, size=int(n / params.searches_per_session) * 2 + 16)
    while lengths.sum() < n:
        lengths = np.concatenate([lengths, rng.geometric(1 / params.searches_per_session, size=16)])
    cum = np.cumsum(lengths)
    last = int(np.searchsorted(cum, n))
    lengths = lengths[: last + 1].copy()
    lengths[-1] -= int(cum[last]) - n
    sessions = lengths.size
    session_user = rng.choice(params.users, size=sessions, p=model.user_p)
    start = (rng.choice(24, size=sessions, p=model.hour_p) + rng.random(sessions)) * 3600.0
    of_session = np.repeat(np.arange(sessions), lengths)
    first = np.cumsum(lengths) - lengths
    within = np.arange(n) - first[of_session]
    gaps = params.min_gap_seconds + rng.exponential(params.think_seconds, size=n)
    gaps[within == 0] = 0.0
    elapsed = np.cumsum(gaps)
    elapsed -= elapsed[first][of_session]
    duration = elapsed[first + lengths - 1]
    start = np.minimum(start, 86399.0 - duration)  # a session ends before midnight
    session_ids = [_stable_id("s", model.seed, day, s) for s in range(sessions)]
    return _Searches(
        seconds=start[of_session] + elapsed,
        users=[model.users[session_user[s]] for s in of_session.tolist()],
        sessions=[session_ids[s] for s in of_session.tolist()],
        impressions=[f"{session_ids[s]}.{w + 1}" for s, w in zip(of_session.tolist(), within.tolist())],
        query=rng.choice(len(model.corpus.queries), size=n, p=model.query_p),
        bot_mode=np.full(n, -1),
    )


def _bot_searches(model: _Model, rng: np.random.Generator, day: dt.date, bot: int) -> _Searches:
    params = model.params
    n = int(rng.integers(params.bot_searches_min, params.bot_searches_max + 1))
    gaps = rng.uniform(params.bot_gap_min_seconds, params.bot_gap_max_seconds, size=n)
    elapsed = np.cumsum(gaps) - gaps[0] if n else gaps
    start = rng.random() * max(0.0, 86399.0 - float(elapsed[-1] if n else 0.0))
    session = _stable_id("s", model.seed, day, "bot", bot)
    return _Searches(
        seconds=start + elapsed,
        users=[_stable_id("u", model.seed, day, "bot", bot)] * n,
        sessions=[session] * n,
        impressions=[f"{session}.{k + 1}" for k in range(n)],
        query=rng.integers(len(model.corpus.queries), size=n),
        bot_mode=np.full(n, int(rng.random() < 0.5)),
    )


@dataclass
class _Day:
    """One simulated day: landing rows in file order, their corruptions, and what to report."""

    rows: list[tuple[Any, ...]]
    corruptions: list[str | None]
    human: pa.Table  # impression_id, position, clicked, grade of the people's rows (once each)
    human_queries: np.ndarray
    counts: dict[str, int]


def simulate_day(model: _Model, day: dt.date) -> _Day:
    """Searches, ranked results, clicks, bots, duplicates and malformed lines of one day."""
    params, corpus = model.params, model.corpus
    rng = np.random.default_rng([model.seed, day.toordinal()])
    searches = _Searches.concat(
        [_human_searches(model, rng, day)] + [_bot_searches(model, rng, day, b) for b in range(params.bots_per_day)]
    )
    sizes = corpus.offsets[searches.query + 1] - corpus.offsets[searches.query]
    of_search = np.repeat(np.arange(sizes.size), sizes)
    position = np.arange(of_search.size) - (np.cumsum(sizes) - sizes)[of_search] + 1
    doc = corpus.offsets[searches.query][of_search] + position - 1
    score = model.ranker_score[doc] + rng.normal(0.0, params.ranker_jitter, doc.size)
    doc = doc[np.lexsort((-score, of_search))]  # best first within each search
    examined = rng.random(doc.size) < params.exam_top * position.astype(float) ** -params.exam_decay
    clicked = examined & (rng.random(doc.size) < model.attract[doc])
    mode = searches.bot_mode[of_search]
    clicked = np.where(mode < 0, clicked, mode == 1)
    shown = position <= params.max_results
    of_search, position, doc, clicked, mode = of_search[shown], position[shown], doc[shown], clicked[shown], mode[shown]
    duplicated = rng.random(sizes.size) < params.duplicate_rate
    malformed = rng.choice(doc.size, size=min(params.malformed_per_day, doc.size), replace=False)
    kinds = {int(r): CORRUPTIONS[k % len(CORRUPTIONS)] for k, r in enumerate(sorted(malformed.tolist()))}
    stamps = [_iso(day, s) for s in searches.seconds.tolist()]
    rows = [
        (stamps[s], searches.users[s], searches.sessions[s], searches.impressions[s], corpus.queries[searches.query[s]],
         corpus.doc_ids[d], corpus.titles[d], p, c)
        for s, d, p, c in zip(of_search.tolist(), doc.tolist(), position.tolist(), clicked.tolist())
    ]
    out_rows, corruptions = _file_order(rows, of_search.tolist(), kinds, duplicated)
    human = mode < 0
    return _Day(
        rows=out_rows,
        corruptions=corruptions,
        human=pa.table(
            {
                "impression_id": [searches.impressions[s] for s in of_search[human].tolist()],
                "position": position[human],
                "clicked": clicked[human],
                "grade": corpus.grade[doc[human]],
            }
        ),
        human_queries=searches.query[searches.bot_mode < 0],
        counts={
            "lines": len(out_rows),
            "searches": int((searches.bot_mode < 0).sum()),
            "bot_searches": int((searches.bot_mode >= 0).sum()),
            "bot_rows": int((~human).sum()),
            "malformed_lines": len(kinds),
            "duplicate_lines": len(out_rows) - len(rows) - len(kinds),
        },
    )


def _file_order(
    rows: list[tuple[Any, ...]], of_search: list[int], kinds: dict[int, str], duplicated: np.ndarray
) -> tuple[list[tuple[Any, ...]], list[str | None]]:
    """Rows as logged: a malformed copy right after its row, a retried search's rows twice."""
    out: list[tuple[Any, ...]] = []
    corruptions: list[str | None] = []
    block: list[tuple[Any, ...]] = []
    for i, row in enumerate(rows):
        out.append(row)
        corruptions.append(None)
        block.append(row)
        if i in kinds:
            out.append(row)
            corruptions.append(kinds[i])
        if i + 1 == len(rows) or of_search[i + 1] != of_search[i]:
            if duplicated[of_search[i]]:
                out.extend(block)
                corruptions.extend([None] * len(block))
            block = []
    return out, corruptions


def _iso(day: dt.date, seconds: float) -> str:
    ms = min(int(round(seconds * 1000)), 86_399_999)
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{day.isoformat()}T{hours:02d}:{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}+00:00"


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
    model = _Model(load_corpus(settings), params, seed)
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
