"""The vectorised ingest path writes the per-line reference's bytes, and does the bulk of the work itself.

Every landing fixture of the ingest tests (hand-made lines, odd timestamps and positions, oversize and
non-UTF-8 lines, mixed formats, the fuzz files of every format), a set of edge-case lines (escapes,
separators, whitespace, line ends), the TREC Session fixture and simulated days in every format are
ingested by both engines; clicks/, quarantine/ and the manifests must be identical byte for byte.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from pathlib import Path

import pytest
from test_ingest import bot_rows, jsonl, landing_file, landing_lines, row
from test_ingest_fuzz import delimited_file, jsonl_file, parquet_file, random_rows

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, InputError
from pipeline.ingest.arrow_path import decode_jsonl, read_file_vectorised
from pipeline.ingest.columns import check_columns
from pipeline.ingest.ingest import ENGINES, ingest_dates
from pipeline.ingest.reference_path import read_file_per_line
from pipeline.simulate.sim_params import SimParams
from pipeline.simulate.simulate import simulate
from pipeline.storage.store import Store

DAY = dt.date(2026, 1, 1)
LANDING = "landing/clicks/dt=2026-01-01"
SMALL = SimParams(searches_per_day=250, users=150, bots_per_day=1, bot_searches_min=12, bot_searches_max=15, malformed_per_day=6)
FIXTURES = Path(__file__).parent / "fixtures"


def outputs_by_engine(settings: Settings, dates: list[dt.date]) -> dict[str, dict[str, bytes]]:
    """Every file under clicks/ and quarantine/ after ingesting ``dates`` with each engine."""
    store = Store.from_settings(settings)
    found = {}
    for engine in ENGINES:
        for folder in ("clicks", "quarantine"):
            if store.exists(folder):
                store.delete(folder)
        ingest_dates(settings, dates, engine=engine)
        found[engine] = {path: store.read_bytes(path) for folder in ("clicks", "quarantine") for path in store.list_files(folder)}
    return found


def assert_same_outputs(settings: Settings, dates: list[dt.date]) -> None:
    found = outputs_by_engine(settings, dates)
    reference = found.pop("per-line")
    assert reference and any("quarantine/" in path for path in reference)
    for engine, outputs in found.items():
        assert sorted(outputs) == sorted(reference), engine
        assert [p for p in reference if outputs[p] != reference[p]] == [], engine


EDGE_LINES = [
    json.dumps(row("e.1", 1)),  # json.dumps' default separators
    json.dumps(row("e.1", 2), separators=(",", ":")),
    json.dumps(row("e.1", 3, title='6 in. "Heavy" Duty')),  # escaped quotes: per line
    json.dumps(row("e.1", 4, title="Caf\u00e9 Table")),  # \\u escape
    json.dumps(row("e.1", 5, title="Caf\u00e9 Table"), ensure_ascii=False),  # raw UTF-8
    json.dumps(row("e.1", 6, query="\u3000drill\u00a0bit ")),  # Unicode whitespace
    json.dumps(row("e.1", 7, query="Drill\tBit")).replace("\\t", "\t"),  # a raw tab: invalid JSON
    json.dumps(row("e.1", 8, query="Drill\x1fBit")),  # \\u001f: a separator Python splits on
    json.dumps(row("e.1", 9, title="Drill \x7f")),  # DEL
    json.dumps(row("e.1", 10, title="bad \ud800 surrogate")),
    json.dumps(row("e.2", 1)) + "\r",  # CRLF
    " " + json.dumps(row("e.2", 2)) + " ",
    json.dumps({**row("e.2", 3), "extra": 1}),
    json.dumps(dict(reversed(list(row("e.2", 4).items())))),
    json.dumps(row("e.2", 5)).replace('"position": 5', '"position": 05'),
    json.dumps(row("e.2", 6)).replace('"position": 6', '"position": "6"'),
    json.dumps(row("e.2", 7, clicked=1)),
    json.dumps(row("e.2", 8, position=0)),
    json.dumps(row("e.2", 9, ts="2026-01-01T10:00:00.123456+05:30")),
    json.dumps(row("e.2", 10, ts="2026-01-01T10:00:00Z")),
    json.dumps(row("e.3", 1, ts="2026-02-30T10:00:00Z")),
    json.dumps(row("e.3", 2, ts="2026-01-01T10:00:60Z")),
    json.dumps(row("e.3", 3, ts="2026-01-01T10:00:00+24:00")),
    json.dumps(row("e.3", 4, ts="2024-02-29T10:00:00Z")),
    json.dumps(row("e.3", 5, ts="2025-12-31T00:00:00-00:01")),
    json.dumps(row("e.3", 6, ts="2026-01-01 10:00:00+00:00")),
    json.dumps(row("e.3", 7, user_id="  ")),
    json.dumps(row("e.3", 8, doc_id="x" * 16_385)),
    json.dumps(row("e.3", 9, title="  Drill   MODEL  9x ")),
    json.dumps(row("e.1", 1)),  # a duplicate of the first line
    "",
    "{}",
]


@pytest.mark.parametrize(
    "files",
    [
        {"part-0.jsonl": jsonl(landing_lines())},
        {"part-0.jsonl": ("\n".join(EDGE_LINES) + "\n").encode("utf-8", "surrogatepass")},
        {"part-0.jsonl": ("\ufeff" + "\n".join(EDGE_LINES[:3])).encode()},  # BOM, no final newline
        {"a.jsonl": jsonl([row("a.1", 1), row("a.1", 2)]), "b.csv": landing_file("csv", [row("a.1", 1), row("b.1", 1)]),
         "c.parquet": landing_file("parquet", [row("a.1", 2), row("c.1", 1)]), "d.tsv": landing_file("csv", [row("d.1", 1)]).replace(b",", b"\t")},
        {f"part-0.{fmt}": landing_file(fmt, [row(f"a.{k}", 1, ts=ts) for k, ts in enumerate(
            ["0001-01-01T00:00:00+14:00", "2025-12-31T00:00:00.000+00:00", "2026-01-03T00:59:00+01:00", "2026-01-03T00:00:00+00:00",
             "2026-01-01T10:00:00", "yesterday"], start=1)] + [row("a.9", 2, position=2**31)]
            + ([] if fmt == "parquet" else [row("a.9", 3, position="²"), row("a.9", 4, position="007")]))
         for fmt in ("jsonl", "csv", "parquet")},
        {"part-0.csv": b'ts,user_id,session_id,impression_id,query,doc_id,title,position,clicked,ts\n'
                       + "\n".join(",".join(str(r[k]) for k in r) + ",x" for r in [row("q.1", 1), row("q.1", 2)]).encode()
                       + b'\n2026-01-01T10:01:00+00:00,u,s,s.1,"a ""quoted"" query",d,"two\nlines",1,true,x\n\n'
                       + b'2026-01-01T10:01:00+00:00,u,s,s.1,q,d,t,1,True,x\r\n'},
        {"part-1.jsonl": b"\n".join(json.dumps(row(f"a.{k}", 1)).encode() for k in range(1, 6))
         + b"\n" + json.dumps(row("a.8", 1, title="Drill 90\u00b0"), ensure_ascii=False).encode("latin-1") + b"\n"},
    ],
    ids=["landing-lines", "edge-lines", "bom", "mixed-formats", "timestamps-and-positions", "csv-quoting", "one-latin1-line"],
)
def test_engines_write_the_same_bytes_for_the_fixtures(settings: Settings, store: Store, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        store.write_bytes(f"{LANDING}/{name}", data)
    store.write_bytes(f"{LANDING}/zz.jsonl", jsonl(bot_rows()))
    assert_same_outputs(settings, [DAY])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_engines_write_the_same_bytes_for_fuzz_files(settings: Settings, store: Store, seed: int) -> None:
    rng = random.Random(seed)
    for name, encode in [("a.jsonl", jsonl_file), ("b.csv", lambda r, rows: delimited_file(r, rows, ",")),
                         ("c.tsv", lambda r, rows: delimited_file(r, rows, "\t")), ("d.parquet", parquet_file)]:
        data, _ = encode(rng, random_rows(rng, 1000 * len(name))[0])
        store.write_bytes(f"{LANDING}/{name}", data)
    assert_same_outputs(settings, [DAY])


def test_engines_write_the_same_bytes_for_the_trec_session_fixture(settings: Settings, store: Store) -> None:
    store.write_bytes(f"{LANDING}/trec.xml", (FIXTURES / "trec_small.xml").read_bytes())
    store.write_bytes(f"{LANDING}/zz.jsonl", jsonl([row("a.1", 1)]))
    assert_same_outputs(settings, [DAY])


@pytest.mark.heavy  # over 10 s: left out of make check
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_engines_write_the_same_bytes_for_simulated_days(settings: Settings, fmt: str) -> None:
    simulate(settings, DAY, 2, params=SMALL, fmt=fmt)
    assert_same_outputs(settings, [DAY, DAY + dt.timedelta(days=1)])


def test_the_vectorised_path_reads_clean_rows_itself(settings: Settings, store: Store) -> None:
    """Only the malformed lines and the rows with non-ASCII text go to the per-line checks."""
    simulate(settings, DAY, 1, params=SMALL)
    path = store.list_files(LANDING)[0]
    data = store.read_bytes(path)
    decoded = decode_jsonl(data, path)
    assert decoded is not None
    sure, unsure = check_columns(decoded.columns, path, DAY)
    non_ascii = sum(not line.isascii() for line in data.splitlines())
    assert len(decoded.unsplit_lines) <= SMALL.malformed_per_day + non_ascii and len(unsure) <= non_ascii
    assert sure.num_rows >= decoded.rows_read - SMALL.malformed_per_day - non_ascii > 0
    assert read_file_vectorised(data, path, DAY) == read_file_per_line(data, path, DAY)


@pytest.mark.heavy  # over 10 s: left out of make check
def test_worker_count_does_not_change_the_bytes(settings: Settings) -> None:
    simulate(settings, DAY, 3, params=SMALL, fmt="csv")
    dates = [DAY + dt.timedelta(days=k) for k in range(3)]
    store = Store.from_settings(settings)
    written = []
    for workers in (1, 2):
        shutil.rmtree(store.local_path("clicks"), ignore_errors=True)
        result = ingest_dates(settings.with_overrides(dask_workers=workers), dates)
        assert result["rows_read"] == sum(result[k] for k in ("accepted", "quarantined", "duplicates", "bot_rows"))
        written.append({p: store.read_bytes(p) for folder in ("clicks", "quarantine") for p in store.list_files(folder)})
    assert written[0] == written[1] and len(written[0]) == 3 * 4  # clicks, manifest, both quarantines per date


def test_a_bad_file_read_on_a_dask_worker_stops_with_the_one_line_error(settings: Settings, store: Store) -> None:
    store.write_bytes(f"{LANDING}/a.jsonl", jsonl([row("a.1", 1)]))
    store.write_bytes("landing/clicks/dt=2026-01-02/b.csv", b"ts,user_id\n1,2\n")
    with pytest.raises(InputError, match=r"dt=2026-01-02/b\.csv, row 1: missing column\(s\) session_id") as caught:
        ingest_dates(settings, [DAY, DAY + dt.timedelta(days=1)])
    assert caught.value.path == store.uri("landing/clicks/dt=2026-01-02/b.csv")


def test_unknown_engine_is_a_config_error(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="unknown ingest engine 'fast'; expected one of arrow, per-line"):
        ingest_dates(settings, [DAY], engine="fast")


def test_the_result_names_the_engine(settings: Settings, store: Store) -> None:
    store.write_bytes(f"{LANDING}/a.jsonl", jsonl([row("a.1", 1)]))
    assert ingest_dates(settings, [DAY], engine="per-line")["engine"] == "per-line"


def test_cli_engine_flag_chooses_the_path(settings: Settings, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    from deepsent.cli import main

    store.write_bytes(f"{LANDING}/a.jsonl", jsonl([row("a.1", 1)]))
    assert main(["ingest", "--date", "2026-01-01", "--engine", "per-line", "--json", "--store", settings.store]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "per-line"
