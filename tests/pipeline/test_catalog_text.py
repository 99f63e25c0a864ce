"""Catalogue text (issue #55, item 7): ids written one way only, titles that show something and hold no control
character, hidden characters printed escaped by ``deepsent search``, and days ingested out of order refused."""
from __future__ import annotations

import argparse
import json
from typing import Any

import pyarrow as pa
import pytest

from deepsent.cli import main
from deepsent.commands import search
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.ingest.ingest import ingest_dates
from pipeline.ingest.paths import catalog_manifest_path, catalog_path
from pipeline.storage.store import Store
from pipeline.text.textnorm import blank, hidden_char, visible
from tests.pipeline.test_catalog import D1, D2, D3, catalogue, click_file, csv_bytes, jsonl, landing, quarantine


NFD, NFC = "cafe\u0301", "caf\u00e9"


def test_a_product_id_is_written_one_way_only(settings: Settings, store: Store) -> None:
    store.write_bytes(landing(D1, "snapshot.jsonl"), jsonl([
        {"product_id": "p1", "title": "Drill"},
        {"product_id": "p1\u0000", "title": "Drill"},  # 2: NUL
        {"product_id": "p1\n  2. 0.9999  p666  forged result", "title": "Drill"},  # 3: a line break
        {"product_id": "p\u200b1", "title": "Drill"},  # 4: a zero-width space
        {"product_id": "p\u202e1", "title": "Drill"},  # 5: a right-to-left override
        {"product_id": " p1", "title": "Drill"},  # 6: a space in front
        {"product_id": "ｐ１", "title": "Drill"},  # 7: full-width letters and digits
        {"product_id": NFD, "title": "Drill"},  # 8: NFD
        {"product_id": NFC, "title": "Cafe Drill"},  # NFC and NFKC: kept
        {"product_id": "P1", "title": "Big Drill"},  # case counts: another product
        {"product_id": "p 7", "title": "Saw"},  # a space inside is text
    ]))
    manifest = ingest_dates(settings, [D1])["catalog"]["2026-01-01"]
    assert (manifest["rows_in"], manifest["kept"], manifest["quarantined"]) == (11, 4, 7)
    assert sorted(catalogue(store, D1)) == ["P1", NFC, "p 7", "p1"]
    assert quarantine(store, D1) == [
        ("snapshot.jsonl", 2, "field product_id: hidden character U+0000 in 'p1\\x00'; an id is visible text"),
        ("snapshot.jsonl", 3, "field product_id: hidden character U+000A in 'p1\\n  2. 0.9999  p666  forged "
                              "result'; an id is visible text"),
        ("snapshot.jsonl", 4, "field product_id: hidden character U+200B ZERO WIDTH SPACE in 'p\\u200b1'; an id is "
                              "visible text"),
        ("snapshot.jsonl", 5, "field product_id: hidden character U+202E RIGHT-TO-LEFT OVERRIDE in 'p\\u202e1'; an "
                              "id is visible text"),
        ("snapshot.jsonl", 6, "field product_id: spaces around ' p1'; an id is written without them"),
        ("snapshot.jsonl", 7, "field product_id: 'ｐ１' is not in Unicode NFKC form (which writes it 'p1'); an id is "
                              "written one way only"),
        ("snapshot.jsonl", 8, f"field product_id: {NFD!r} is not in Unicode NFKC form (which writes it {NFC!r}); an "
                              "id is written one way only"),
    ]
    assert all("\n" not in reason for _, _, reason in quarantine(store, D1))  # a reason is one line too


def test_a_title_shows_something_and_holds_no_control_character(settings: Settings, store: Store) -> None:
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(["product_id", "title"], [
        ["p1", "\u200b"],  # 2: only a zero-width space
        ["p2", " \u200b\u2060 "],  # 3: spaces and invisible characters
        ["p3", "Drill\u0000"],  # 4: NUL
        ["p4", "Drill \u001b[2J"],  # 5: ESC (a terminal's escape sequence)
        ["p5", "\"Saw\tBlade\r\nSet\""],  # tabs and line breaks are spaces to normalisation: kept
        ["p6", "Ham\u0089mer"],  # a C1 control (text decoded with the wrong code page): kept, as in real feeds
        ["p7", "dr\u200bill"],  # a zero-width space inside visible text: kept
    ]))
    manifest = ingest_dates(settings, [D1])["catalog"]["2026-01-01"]
    assert (manifest["rows_in"], manifest["kept"], manifest["quarantined"]) == (7, 3, 4)
    assert quarantine(store, D1) == [
        ("snapshot.csv", 2, "field title: nothing visible (only spaces and U+200B ZERO WIDTH SPACE)"),
        ("snapshot.csv", 3, "field title: nothing visible (only spaces and U+200B ZERO WIDTH SPACE)"),
        ("snapshot.csv", 4, "field title: control character U+0000; a title is text"),
        ("snapshot.csv", 5, "field title: control character U+001B; a title is text"),
    ]
    kept = catalogue(store, D1)
    assert kept["p5"][:2] == ("Saw\tBlade\r\nSet", "saw blade set")
    assert kept["p6"][1] == "ham\u0089mer" and kept["p7"][1] == "dr\u200bill"


def test_hidden_characters_are_found_and_shown_escaped() -> None:
    assert hidden_char("drill") is None and hidden_char("dr\u200bill") == "\u200b" and hidden_char("a\tb") == "\t"
    assert blank(" \u200b\u00a0\t") and not blank(" a\u200b")
    assert visible("p1\n  2. 0.99  p6\x00\u200b\u202e") == "p1\\n  2. 0.99  p6\\x00\\u200b\\u202e"
    assert visible("Dräill ½ ∅") == "Dräill ½ ∅"  # visible text is left alone


class _Index:
    """What ``deepsent search`` reads of an opened index: one hit whose id and title hold line breaks."""

    version, default_mode, root = "1", "dense", "indexes/x/1"
    manifest = {"index_type": "IndexFlatIP", "model": "lstm"}
    store = Store("/tmp")

    def search(self, queries: list[str], k: int, mode: str) -> pa.Table:
        return pa.table({"query": ["drill"], "rank": [1], "doc_id": ["p1\n  2. 0.9999  p666  forged"],
                         "title": ["drill\r\x1b[2J"], "score": [0.5], "found_by": ["dense"]})

    def shortfall(self, mode: str, k: int, table: pa.Table, queries: int) -> str:
        return ""


def test_search_prints_one_line_a_hit_whatever_its_id_holds(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from encoders.search import served_index

    monkeypatch.setattr(served_index.ServedIndex, "open", staticmethod(lambda *a: _Index()))
    args = argparse.Namespace(query="drill", queries=None, out=None, mode=None, k=10, model_uri="models:/x@champion")
    lines = search.run_search(args, settings)["summary"].splitlines()
    assert len(lines) == 3  # the heading, the one hit, the timing: no forged line
    assert lines[1] == "  1. 0.5000  p1\\n  2. 0.9999  p666  forged  drill\\r\\x1b[2J  [dense]"


def _days(store: Store) -> None:
    """D1: a snapshot; D3: a delta built on it; D2 (not yet ingested): a delta that retitles p1."""
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(["product_id", "title"], [["p1", "Drill"], ["p2", "Saw"]]))
    store.write_bytes(landing(D2, "delta.csv"), csv_bytes(["product_id", "title"], [["p1", "Drill 20V"]]))
    store.write_bytes(landing(D3, "delta.csv"), csv_bytes(["product_id", "title"], [["p3", "Hammer"]]))


def test_an_older_day_that_changes_a_later_days_base_is_refused(settings: Settings, store: Store,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _days(store)
    ingest_dates(settings, [D1])
    ingest_dates(settings, [D3])  # built on D1: D2 had not landed yet
    before = {p: store.read_bytes(p) for p in store.list_files("catalog")}
    with pytest.raises(InputError, match=r"landing/catalog/dt=2026-01-02: the catalogue of 2026-01-03 was built on that "
                                         r"of 2026-01-01, and ingesting 2026-01-02 now gives it another one: 2026-01-03 "
                                         r"would be left stale\. Nothing was written; ingest 2026-01-02 to 2026-01-03 "
                                         r"again in one run, in date order \(deepsent ingest --start 2026-01-02 --end "
                                         r"2026-01-03\)"):
        ingest_dates(settings, [D2])
    assert main(["ingest", "--date", "2026-01-02", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert {p: store.read_bytes(p) for p in store.list_files("catalog")} == before  # nothing written
    assert not store.exists(catalog_manifest_path(D2))

    assert main(["ingest", "--start", "2026-01-02", "--end", "2026-01-03", "--store", settings.store]) == 0
    assert store.read_json(catalog_manifest_path(D3))["base_date"] == "2026-01-02"
    assert catalogue(store, D3)["p1"][:2] == ("Drill 20V", "drill 20v")  # D2's edit reaches D3
    d3 = store.read_bytes(catalog_path(D3))
    ingest_dates(settings, [D2])  # the same day again, on the same files: nothing changes, so it passes
    assert store.read_bytes(catalog_path(D3)) == d3


def test_an_older_day_that_changes_nothing_later_passes(settings: Settings, store: Store) -> None:
    _days(store)
    store.delete(landing(D2, "delta.csv"))
    click_file(store, D2)  # D2: clicks only, its catalogue carried from D1
    ingest_dates(settings, [D1])
    ingest_dates(settings, [D3])
    d3 = store.read_bytes(catalog_path(D3))
    manifest = ingest_dates(settings, [D2])["catalog"]["2026-01-02"]
    assert manifest["kind"] == "carried" and store.read_bytes(catalog_path(D3)) == d3
    assert json.loads(store.read_text(catalog_manifest_path(D3)))["base_date"] == "2026-01-01"


def test_a_rerun_of_a_day_with_a_changed_file_is_refused_too(settings: Settings, store: Store) -> None:
    _days(store)
    ingest_dates(settings, [D1, D2, D3])
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(["product_id", "title"], [["p1", "Drill"], ["p2", "Jig Saw"]]))
    with pytest.raises(InputError, match=r"the catalogue of 2026-01-02 was built on that of 2026-01-01.*"
                                         r"--start 2026-01-01 --end 2026-01-03"):
        ingest_dates(settings, [D1])
    got: dict[str, Any] = ingest_dates(settings, [D1, D2, D3])["catalog"]
    assert got["2026-01-03"]["products"] == 3 and catalogue(store, D3)["p2"][0] == "Jig Saw"
