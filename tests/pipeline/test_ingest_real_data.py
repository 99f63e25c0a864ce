"""Integration on the real shared data: 30 simulated days end to end, the two ingest engines on the same bytes,
and the TREC Session XML as-is."""
from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET

import pyarrow.compute as pc
import pytest

from pipeline.core.config import Settings
from pipeline.features.pairs import build_pairs
from pipeline.ingest.ingest import ingest_dates
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from pipeline.text.textnorm import normalize

pytestmark = pytest.mark.slow
START = dt.date(2026, 1, 1)
DAYS = 30
#: Days the two ingest engines are compared on: enough for every kind of row (malformed, duplicate, bot, catalogue
#: launches, retirements and retitles), not a month (the engines read each day alone).
ENGINE_DAYS = 4
_QUERY_LITERAL = re.compile(r'"query":("(?:[^"\\\n]|\\.)*")')  # within one line


def test_thirty_days_simulate_ingest_pairs(settings: Settings) -> None:
    store = Store.from_settings(settings)
    sim = simulate(settings, START, DAYS)
    got = ingest_dates(settings, [START + dt.timedelta(days=k) for k in range(DAYS)])
    pairs = build_pairs(settings)

    assert len(got["per_date"]) == DAYS
    for counts in got["per_date"].values():
        assert counts["rows_read"] == counts["accepted"] + counts["quarantined"] + counts["duplicates"] + counts["bot_rows"]
    assert got["rows_read"] == sim["lines"]
    assert got["quarantined"] == sim["malformed_lines"]
    assert got["duplicates"] == sim["duplicate_lines"]
    assert got["bot_rows"] == sim["bot_rows"]
    assert pairs["rows_read"] == got["accepted"]
    assert sim["queries_issued"] / sim["queries_available"] > 0.85  # most training queries get issued

    dev = read_judgments(settings.dev_judgments)
    dev_raw = set(dev.column("query_raw").to_pylist())
    dev_norm = set(dev.column("query").to_pylist())
    landing_queries: set[str] = set()
    for path in store.list_files("landing/clicks"):
        literals = set(_QUERY_LITERAL.findall(store.read_text(path)))
        landing_queries |= {json.loads(lit) for lit in literals}
    assert landing_queries and not landing_queries & dev_raw
    assert not {normalize(q) for q in landing_queries} & dev_norm
    clicks = store.read_table("clicks", columns=["query_raw", "query"])
    assert not pc.any(pc.is_in(clicks.column("query_raw"), value_set=pc.unique(dev.column("query_raw")))).as_py()
    assert not pc.any(pc.is_in(clicks.column("query"), value_set=pc.unique(dev.column("query")))).as_py()
    for name in ("train", "valid"):
        queries = set(store.read_table(f"pairs/{name}.parquet", columns=["query"]).column("query").to_pylist())
        assert queries and not queries & dev_norm
    quarantined = store.read_table("quarantine/ingest", columns=["raw"]).column("raw").to_pylist()
    dev_literals = [f'"query":{json.dumps(q, ensure_ascii=False)}' for q in dev_raw]
    assert quarantined and not [lit for lit in dev_literals for raw in quarantined if lit in raw]


def test_trec_session_xml_ingests_as_is(settings: Settings) -> None:
    store = Store.from_settings(settings)
    day = dt.date(2013, 7, 1)
    store.put_file("landing/clicks/dt=2013-07-01/sessiontrack2013.xml", settings.trec_session_xml)
    got = ingest_dates(settings, [day])

    root = ET.parse(settings.trec_session_xml).getroot()
    shown, untitled, clicked = 0, 0, 0
    for interaction in root.iter("interaction"):
        ranks = {c.findtext("rank").strip() for c in interaction.iter("click")}
        for result in interaction.iter("result"):
            shown += 1
            has_title = bool((result.findtext("title") or "").strip())
            untitled += not has_title
            clicked += has_title and result.get("rank") in ranks
    assert got["rows_read"] == shown
    assert got["quarantined"] == untitled
    assert got["bot_rows"] == 0  # real people: nobody runs 10 searches a minute
    assert got["accepted"] + got["duplicates"] == shown - untitled
    clicks = store.read_table("clicks/dt=2013-07-01")
    assert sum(clicks.column("clicked").to_pylist()) == clicked
    assert clicks.column("ts").to_pylist()[0].date() == day
    reasons = store.read_table("quarantine/ingest/dt=2013-07-01").column("reason").to_pylist()
    assert set(reasons) == {"field title: empty"}


def test_simulated_days_give_the_same_bytes_on_both_engines(settings: Settings) -> None:
    """The vectorised path against the per-line reference over days of a simulated log with every kind of row."""
    store = Store.from_settings(settings)
    simulate(settings, START, ENGINE_DAYS)
    dates = [START + dt.timedelta(days=k) for k in range(ENGINE_DAYS)]
    written = {}
    for engine in ("per-line", "arrow"):
        result = ingest_dates(settings, dates, engine=engine)
        assert result["rows_read"] == sum(result[k] for k in ("accepted", "quarantined", "duplicates", "bot_rows"))
        assert min(result[k] for k in ("accepted", "quarantined", "duplicates", "bot_rows")) > 0, result
        written[engine] = {p: store.read_bytes(p) for folder in ("clicks", "quarantine", "catalog")
                           for p in store.list_files(folder)}
    # per day: clicks + manifest, two quarantines (clicks, catalogue), the catalogue, its changes and manifest
    assert len(written["arrow"]) == 7 * ENGINE_DAYS and written["arrow"] == written["per-line"]
