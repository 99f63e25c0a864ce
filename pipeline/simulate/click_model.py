"""The click model behind the simulator (:mod:`pipeline.simulate.simulate`): one day of searches, results and clicks.

:class:`ClickModel` holds what is fixed for a seed (query popularity, the ranker's errors, each title's
attractiveness, the user pool); :func:`simulate_day` draws a day's people and bot searches, ranks each query's
judged titles, draws position-based clicks, and writes the rows in file order with retried and malformed lines.
A day's randomness is seeded by ``(seed, date)``, so its content does not depend on the start date.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.core.config import Settings
from pipeline.simulate.catalog_feed import Shown
from pipeline.simulate.landing_writers import CORRUPTIONS
from pipeline.simulate.sim_params import SimParams
from pipeline.text.homedepot import is_gate_query, iter_judgments


@dataclass(frozen=True)
class JudgedCorpus:
    """The training judgments the clicks are drawn from, grouped by query: query q's titles are rows
    offsets[q]:offsets[q+1]; and the shop's products (every row's product and title, the gate slice's too)."""

    queries: list[str]
    offsets: np.ndarray
    doc_ids: list[str]
    titles: list[str]
    relevance: np.ndarray
    grade: np.ndarray
    product_ids: list[str]
    product_titles: list[str]


def load_corpus(settings: Settings) -> JudgedCorpus:
    """The training judgments (only them: the dev set is never read) grouped by query, less the gate slice's
    queries (:func:`pipeline.text.homedepot.is_gate_query`: their judgments are the demo's gate set, so no click is
    ever drawn from them); the products of every row are the shop's catalogue."""
    path = settings.train_judgments
    stat = path.stat() if path.exists() else None
    return _load_corpus(str(path), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)


@lru_cache(maxsize=2)
def _load_corpus(path: str, mtime_ns: int, size: int) -> JudgedCorpus:
    """Cached per file version (path, mtime, size): re-reading 57k rows costs ~0.5 s."""
    by_query: dict[str, list[Any]] = {}
    everything = iter_judgments(path)
    for j in everything:
        if not is_gate_query(j.query_raw):
            by_query.setdefault(j.query_raw, []).append(j)
    rows = [j for group in by_query.values() for j in group]
    sizes = [len(group) for group in by_query.values()]
    return JudgedCorpus(
        queries=list(by_query),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        doc_ids=[j.doc_id for j in rows],
        titles=[j.title_raw for j in rows],
        relevance=np.array([j.relevance for j in rows]),
        grade=np.array([j.label for j in rows], dtype=np.int64),
        product_ids=[j.doc_id for j in everything],
        product_titles=[j.title_raw for j in everything],
    )


class ClickModel:
    """Everything fixed for a seed: query popularity, ranker errors, attractiveness, user ids."""

    def __init__(self, corpus: JudgedCorpus, params: SimParams, seed: int) -> None:
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


def _human_searches(model: ClickModel, rng: np.random.Generator, day: dt.date) -> _Searches:
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


def _bot_searches(model: ClickModel, rng: np.random.Generator, day: dt.date, bot: int) -> _Searches:
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
class SimulatedDay:
    """One simulated day: landing rows in file order, their corruptions, and what to report."""

    rows: list[tuple[Any, ...]]
    corruptions: list[str | None]
    human: pa.Table  # impression_id, position, clicked, grade of the people's rows (once each)
    human_queries: np.ndarray
    counts: dict[str, int]


def simulate_day(model: ClickModel, day: dt.date, shown: Shown | None = None) -> SimulatedDay:
    """Searches, ranked results, clicks, bots, duplicates and malformed lines of one day (``shown``: only the live
    products of the day's catalogue, with their titles as edited by then; None: every product as judged)."""
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
    if shown is not None:  # the products not live that day drop out of their lists, the rest move up
        keep = shown.live[doc]
        of_search, doc = of_search[keep], doc[keep]
        live_sizes = np.bincount(of_search, minlength=sizes.size)
        position = np.arange(of_search.size) - (np.cumsum(live_sizes) - live_sizes)[of_search] + 1
    titles = corpus.titles if shown is None else _Titles(corpus.titles, shown.titles)
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
         corpus.doc_ids[d], titles[d], p, c)
        for s, d, p, c in zip(of_search.tolist(), doc.tolist(), position.tolist(), clicked.tolist())
    ]
    out_rows, corruptions = _file_order(rows, of_search.tolist(), kinds, duplicated)
    human = mode < 0
    return SimulatedDay(
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


class _Titles:
    """The corpus titles with a day's edits over them."""

    def __init__(self, titles: list[str], edited: dict[int, str]) -> None:
        self.titles, self.edited = titles, edited

    def __getitem__(self, row: int) -> str:
        return self.edited.get(row, self.titles[row])


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
