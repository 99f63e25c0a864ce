"""The catalogue as the corpus (#42): clicks name live products (both engines, same bytes), the corpus reader returns the
latest catalogue's live products, the simulator shows only the products live that day, and compare --retrieval
searches the catalogue plus the judged titles it lacks."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any


from eval.retrieval.compare import judged_retrieval
from pipeline.core.config import Settings
from pipeline.ingest.catalog.corpus import corpus_titles
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import catalog_path
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store
from pipeline.text.textnorm import normalize

D0, D1, D2, D3 = dt.date(2025, 12, 31), dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)


def click(day: dt.date, n: int, doc_id: str, title: str) -> dict[str, Any]:
    return {"ts": f"{day.isoformat()}T10:00:{n:02d}+00:00", "user_id": f"u{n}", "session_id": f"s{n}",
            "impression_id": f"i{n}", "query": "drill", "doc_id": doc_id, "title": title, "position": 1, "clicked": True}


def write_days(store: Store) -> None:
    """A snapshot on D1, a delta on D2 (p4 launched, p2 retired, p1 edited); clicks on D0 (before any catalogue),
    D1 (JSONL) and D2 (CSV) naming live, not yet launched, retired and unknown products."""
    store.write_bytes(f"landing/catalog/dt={D1}/snapshot.csv", b"product_id,title\np1,Drill\np2,Saw\np3,Hammer\n")
    store.write_bytes(f"landing/catalog/dt={D2}/delta.jsonl", b'{"product_id":"p4","title":"Nail Gun"}\n'
                      b'{"product_id":"p2","op":"retire"}\n{"product_id":"p1","title":"Drill 20V"}\n')
    store.write_bytes(f"landing/clicks/dt={D0}/part-0.jsonl", (json.dumps(click(D0, 1, "p9", "Gadget")) + "\n").encode())
    day1 = [click(D1, 1, "p1", "Drill"), click(D1, 2, "p4", "Nail Gun"), click(D1, 3, "p9", "Gadget"),
            click(D1, 4, "p3", "Hammer")]
    store.write_bytes(f"landing/clicks/dt={D1}/part-0.jsonl", "".join(json.dumps(r) + "\n" for r in day1).encode())
    day2 = [click(D2, 1, "p2", "Saw"), click(D2, 2, "p4", "Nail Gun"), click(D2, 3, "p1", "Drill 20V")]
    header = list(day2[0])
    lines = [",".join(header)] + [",".join(str(r[k]).lower() if isinstance(r[k], bool) else str(r[k]) for k in header)
                                  for r in day2]
    store.write_bytes(f"landing/clicks/dt={D2}/part-0.csv", ("\n".join(lines) + "\n").encode())


def outputs(store: Store) -> dict[str, bytes]:
    return {p: store.read_bytes(p) for p in store.list_files("") if p.startswith(("clicks/", "quarantine/", "catalog/"))}


def test_clicks_on_unknown_unlaunched_or_retired_products_are_quarantined_by_both_engines(
        settings: Settings, tmp_path: Path) -> None:
    found = {}
    for engine in ("per-line", "arrow"):
        here = settings.with_overrides(store=str(tmp_path / engine))
        store = Store.from_settings(here)
        write_days(store)
        days = [ingest_dates(here, [day], engine=engine)["per_date"][day.isoformat()] for day in (D0, D1, D2)]
        found[engine] = outputs(store)
    assert found["per-line"] == found["arrow"]  # the same bytes
    for manifest in days:
        assert manifest["rows_read"] == manifest["accepted"] + manifest["quarantined"] + manifest["duplicates"] \
            + manifest["bot_rows"]
    assert [(m["rows_read"], m["accepted"], m["quarantined"]) for m in days] == [(1, 1, 0), (4, 2, 2), (3, 2, 1)]
    assert days[1]["quarantine_reasons"] == {"unknown_product": 2}
    quarantined = store.read_table(f"quarantine/ingest/dt={D1}").to_pylist() + \
        store.read_table(f"quarantine/ingest/dt={D2}").to_pylist()
    assert [(q["source_file"].rsplit("/", 1)[1], q["source_line"], q["reason"]) for q in quarantined] == [
        ("part-0.jsonl", 2, "unknown_product: doc_id 'p4' is not live in the catalogue of 2026-01-01"),  # not launched
        ("part-0.jsonl", 3, "unknown_product: doc_id 'p9' is not live in the catalogue of 2026-01-01"),  # unknown
        ("part-0.csv", 2, "unknown_product: doc_id 'p2' is not live in the catalogue of 2026-01-02"),  # retired
    ]
    assert json.loads(quarantined[0]["raw"])["doc_id"] == "p4" and json.loads(quarantined[2]["raw"])["title"] == "Saw"
    assert store.read_table(f"clicks/dt={D0}").column("doc_id").to_pylist() == ["p9"]  # no catalogue that day
    assert store.read_table(f"clicks/dt={D2}").column("doc_id").to_pylist() == ["p4", "p1"]


def test_the_corpus_is_the_latest_catalogues_live_products(settings: Settings, store: Store) -> None:
    titles, sources = corpus_titles(settings, store)
    assert str(settings.train_judgments) in sources and "catalog" not in json.dumps(sources)  # no catalogue yet
    write_days(store)
    ingest_dates(settings, [D1])
    ingest_dates(settings, [D2])
    store.write_bytes(f"landing/clicks/dt={D3}/part-0.jsonl", (json.dumps(click(D3, 1, "p3", "Hammer")) + "\n").encode())
    ingest_dates(settings, [D3])  # no catalogue file: D2's is carried
    titles, sources = corpus_titles(settings, store)
    assert titles == [("p1", "drill 20v"), ("p3", "hammer"), ("p4", "nail gun")]  # p2 retired, p1 edited
    assert sources == {catalog_path(D3): 3}


def test_the_simulator_shows_only_the_products_live_that_day(settings: Settings, store: Store) -> None:
    params = SimParams(searches_per_day=400, users=300, bots_per_day=1, malformed_per_day=0, catalog_launch_share=0.2,
                       catalog_retire_share=0.2, catalog_edit_share=0.2)
    start, days = dt.date(2026, 3, 1), 4
    sim = simulate(settings, start, days, seed=5, params=params)
    shown_launched = shown_edited = 0
    for offset in range(days):
        day = start + dt.timedelta(days=offset)
        got = ingest_dates(settings, [day])
        assert got["quarantined"] == 0  # no click names a product the day's catalogue lacks
        catalog = {r["product_id"]: r for r in store.read_table(catalog_path(day)).to_pylist()}
        rows = [json.loads(line) for line in store.read_text(f"landing/clicks/dt={day}/part-0.jsonl").splitlines()]
        for row in rows:
            product = catalog[row["doc_id"]]  # launched by then, not retired
            assert normalize(row["title"]) == product["title"]  # an edited title from its edit day on
            shown_launched += product["since"] > start
            shown_edited += product["updated"] > product["since"]
    assert shown_launched and shown_edited and sim["catalog_counts"]["retirements"] > 0
    changes = [c["change"] for k in range(1, days)
               for c in store.read_table(f"catalog/changes/dt={start + dt.timedelta(days=k)}").to_pylist()]
    assert {"launch", "edit", "retire"} <= set(changes)


def test_compare_retrieval_searches_the_catalogue_plus_the_judged_titles_it_lacks(settings: Settings, store: Store,
                                                                                   tmp_path: Path) -> None:
    write_days(store)
    ingest_dates(settings, [D1])
    judged = tmp_path / "judged.csv"
    judged.write_text("query,title,label,doc_id\ndrill,Drill,2,p1\ndrill,Drill Bit Set,1,d9\nsaw,Jig Saw,2,d8\n"
                      "saw,Saw,0,p2\n", encoding="utf-8")
    result = judged_retrieval(settings, judgments=judged, baselines=["bm25"], report_name="catalogue")
    assert result.corpus_titles == 5  # p1, p2, p3 of the catalogue + d8, d9 judged
    said = f"The corpus: 3 titles of {catalog_path(D1)} plus the 2 judged titles of judged.csv they lack."
    assert said in result.table_markdown
    assert store.read_text("reports/catalogue/retrieval.md") == result.table_markdown
