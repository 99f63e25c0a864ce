"""Click simulator: turns the judged training pairs into realistic search-impression logs.

It reads only ``judgments_train.csv`` (Settings.train_judgments), never the dev set, and draws no search from the
gate slice's queries (:func:`pipeline.text.homedepot.is_gate_query`: the demo's judged gate set); the products of
every row are the shop's catalogue. Each day:

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
same seed gives byte-identical files, and a day's draws do not depend on the start date.
This module writes the landing partitions; the knobs are :mod:`pipeline.simulate.sim_params`, the
model itself :mod:`pipeline.simulate.click_model`. With ``catalog_feed=1`` (the default) it also writes the
daily catalogue files of the products (:mod:`pipeline.simulate.catalog_feed`), whose churn is drawn over the
simulated period, and each day's searches show only the products live that day.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.ingest.paths import landing_prefix
from pipeline.simulate.catalog_feed import catalog_plan, write_catalog_feed
from pipeline.simulate.click_model import ClickModel, load_corpus, simulate_day
from pipeline.simulate.clickstats import click_stats, trec_session_stats
from pipeline.simulate.landing_writers import FORMATS, encode_landing
from pipeline.simulate.sim_params import MAX_DAYS, SimParams
from pipeline.storage.store import Store

log = logging.getLogger(__name__)


def bytes_per_day(params: SimParams) -> int:
    """An upper estimate of one day's landing logs: every shown result of every search, ~300 bytes a line."""
    searches = params.searches_per_day + params.bots_per_day * params.bot_searches_max
    return 300 * params.max_results * searches + 300 * params.malformed_per_day


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
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"--days must be from 1 to {MAX_DAYS} (ten years), got {days}")
    store = Store.from_settings(settings)
    store.require_space(days * bytes_per_day(params), f"simulating {days:,} day(s)")
    model = ClickModel(load_corpus(settings), params, seed)
    plan = (catalog_plan(model.corpus.product_ids, model.corpus.product_titles, params, seed, days)
            if params.catalog_feed else None)
    products = plan.products_of(model.corpus.doc_ids) if plan else None
    totals: dict[str, int] = {}
    partitions, human_tables, issued = [], [], set()
    for offset in range(days):
        day = start + dt.timedelta(days=offset)
        simulated = simulate_day(model, day, plan.shown(products, model.corpus.titles, offset) if plan else None)
        partitions.append(_write_partition(store, day, fmt, encode_landing(simulated.rows, simulated.corruptions, fmt)))
        for key, value in simulated.counts.items():
            totals[key] = totals.get(key, 0) + value
        human_tables.append(simulated.human)
        issued.update(simulated.human_queries.tolist())
        log.info("simulate %s: %d lines", day.isoformat(), simulated.counts["lines"])
    catalog = write_catalog_feed(store, plan, start, days, fmt) if plan else {}
    return {
        "start": start.isoformat(),
        "days": days,
        "seed": seed,
        "format": fmt,
        **totals,
        "queries_issued": len(issued),
        "queries_available": len(model.corpus.queries),
        "partitions": partitions,
        **catalog,
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
