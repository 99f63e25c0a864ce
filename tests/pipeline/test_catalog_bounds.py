"""Catalogue ingest within bounds (issue #55, item 4): a file is read in pieces, never whole (a 200 MB file with a
64 MB line allocates about 55 MB; read whole, over 600 MB), a line over the click readers' bound is quarantined unread, a day past
CATALOG_DAY is refused with one line, and the streamed records are the click readers' records."""
from __future__ import annotations

import io
import json
import random
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.ingest.catalog import rows, stream
from pipeline.ingest.formats.delimited import read_delimited
from pipeline.ingest.formats.jsonl import read_jsonl
from pipeline.ingest.formats.records import MAX_LINE_BYTES
from pipeline.ingest.ingest import ingest_dates
from pipeline.storage.quarantine import truncate_utf8
from pipeline.storage.schemas import CATALOG_LANDING_COLUMNS
from pipeline.storage.store import Store
from pipeline.text.bounded_files import FileBounds
from tests.pipeline.test_catalog import D1, catalogue, csv_bytes, jsonl, landing, quarantine

#: What ingesting the 200 MB file below may allocate at its peak: Python objects (tracemalloc) and Arrow buffers (its
#: memory pool) together; streamed, about 35 MB; the click readers alone, reading it whole, take over 600 MB.
ALLOCATED_BOUND_MB = 100
#: What it may add to the resident set of the process (its peak over what it had before): about 120 MB streamed
#: (the allocators' slack included); over 630 MB read whole.
GROWTH_BOUND_MB = 250
_MEASURE = """
import datetime as dt, json, sys, tracemalloc
import pyarrow as pa
from pipeline.ingest.catalog.days import ingest_catalog_days
from pipeline.storage.store import Store

def status(key):  # MB; VmHWM, unlike getrusage's ru_maxrss, is not the forking parent's peak
    with open("/proc/self/status") as lines:
        return next(int(l.split()[1]) for l in lines if l.startswith(key + ":")) / 1024

store, day = Store(sys.argv[1]), dt.date.fromisoformat(sys.argv[2])
paths = store.list_files(f"landing/catalog/dt={day}")
before = status("VmRSS")
tracemalloc.start()
manifest = ingest_catalog_days(store, {day: paths})[day.isoformat()]
allocated = (tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory()) / 2**20
print(json.dumps({"allocated_mb": allocated, "grown_mb": status("VmHWM") - before,
                  **{k: manifest[k] for k in ("rows_in", "kept", "quarantined", "products")}}))
"""


def test_a_200_mb_file_with_a_64_mb_line_is_read_in_bounded_memory(store: Store) -> None:
    big, path = b"x" * (MAX_LINE_BYTES - 100), store.local_path(landing(D1, "delta.jsonl"))
    path.parent.mkdir(parents=True)
    with open(path, "wb") as fh:
        fh.write(jsonl([{"product_id": "p1", "title": "Drill"}]))
        for k in range(2, 2002):  # 2,000 lines just under the line bound: read, parsed and quarantined one by one
            fh.write(b'{"product_id": "p%d", "title": "%s"}\n' % (k, big))
        fh.write(b'{"product_id": "p0", "title": "' + b"y" * (64 << 20) + b'"}\n')  # line 2002: 64 MB
        fh.write(jsonl([{"product_id": "p2", "title": "Saw"}]))
    assert path.stat().st_size > 190e6
    done = subprocess.run([sys.executable, "-c", _MEASURE, store.root, D1.isoformat()], capture_output=True,
                          text=True, timeout=120, check=True)
    got = json.loads(done.stdout)
    assert (got["rows_in"], got["kept"], got["quarantined"], got["products"]) == (2003, 2, 2001, 2)
    assert got["allocated_mb"] < ALLOCATED_BOUND_MB and got["grown_mb"] < GROWTH_BOUND_MB, got
    reasons = quarantine(store, D1)
    assert reasons[0] == ("delta.jsonl", 2, "field title: 65436 characters, over the limit of 16384")
    assert reasons[-1] == ("delta.jsonl", 2002, f"line of {(64 << 20) + 33} bytes is over the limit of "
                                                f"{MAX_LINE_BYTES} bytes")
    raw = store.read_table(f"quarantine/catalog/dt={D1}").column("raw")[-1].as_py()
    assert raw.startswith('{"product_id": "p0", "title": "yyy') and len(raw) == 4096  # its start only


def test_a_csv_line_over_the_bound_is_quarantined_and_the_next_row_read(settings: Settings, store: Store,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "CHUNK_BYTES", 4096)  # the long line spans many chunks
    long = "z" * (3 * MAX_LINE_BYTES)
    store.write_bytes(landing(D1, "snapshot.csv"), csv_bytes(["product_id", "title"], [
        ["p1", "Drill"], ["p2", long], ["p3", f'"Saw\n{long}"'], ["p4", "Hammer"]]))
    manifest = ingest_dates(settings, [D1])["catalog"]["2026-01-01"]
    assert (manifest["rows_in"], manifest["kept"], manifest["products"]) == (4, 2, 2)
    assert quarantine(store, D1) == [
        ("snapshot.csv", 3, f"row of {len(long) + 3} bytes is over the limit of {MAX_LINE_BYTES} bytes"),
        # a quoted row over lines 4-5 passes the bound on line 5: quarantined there, line 6 starts the next row
        ("snapshot.csv", 4, f"row of {len(long) + 9} bytes is over the limit of {MAX_LINE_BYTES} bytes"),
    ]
    assert sorted(catalogue(store, D1)) == ["p1", "p4"]


@pytest.mark.parametrize(("bounds", "message"), [
    (FileBounds("the catalogue files of one day", 50, 1_000, MAX_LINE_BYTES),
     r"landing/catalog/dt=2026-01-01: \d\d bytes of files, more than 50 bytes, the most deepsent reads of the "
     r"catalogue files of one day \(it holds the day's catalogue in memory\); nothing was written"),
    (FileBounds("the catalogue files of one day", 10_000, 3, MAX_LINE_BYTES),
     r"landing/catalog/dt=2026-01-01/snapshot-2\.csv, row 4: more than 3 rows, the most deepsent reads of the "
     r"catalogue files of one day"),
])
def test_a_day_past_its_bounds_is_refused_with_one_line(settings: Settings, store: Store,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], bounds: FileBounds,
                                                         message: str) -> None:
    monkeypatch.setattr(rows, "CATALOG_DAY", bounds)
    store.write_bytes(landing(D1, "snapshot-1.csv"), csv_bytes(["product_id", "title"], [["p1", "Drill"]]))
    store.write_bytes(landing(D1, "snapshot-2.csv"), csv_bytes(["product_id", "title"], [
        ["p2", "Saw"], ["p3", "Hammer"], ["p4", "Level"]]))
    assert main(["ingest", "--date", "2026-01-01", "--store", settings.store]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err), err
    assert not store.exists("catalog")


_TEXT_PIECES = [b"p1,Drill\n", b'p2,"Saw\nblade"\n', b"\n", b'p3,"a""b",x\n', b"p4,Ham\xffmer\n", b"p5,x\r\n",
                b"p6,a\rp7,b\n", b'p10,12" drill\n', b'p11,"open\n', b"p12,\xe2\x82\xac\n", b"p13,last"]
_JSON_PIECES = [b'{"product_id":"p1","title":"Drill"}\n', b"\n", b"{bad\n", b'{"product_id":"p2","title":"\xff"}\n',
                b"[1]\n", b'{"product_id":"p4","title":"\xe2\x82\xac"}']


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl"])
def test_the_streamed_records_are_the_click_readers_records(store: Store, monkeypatch: pytest.MonkeyPatch,
                                                            ext: str) -> None:
    def records(data: bytes) -> object:
        store.write_bytes(f"x/f{ext}", data)
        try:
            got = list(stream.landing_records(store, f"x/f{ext}"))
        except Exception as exc:  # noqa: BLE001 (the same error, by its reason)
            return type(exc).__name__, getattr(exc, "reason", str(exc))
        return [(r.line, truncate_utf8(r.raw, 4096), r.values, r.error) for r in got]

    def whole(data: bytes) -> object:
        try:
            got = read_jsonl(data, "f") if ext == ".jsonl" else \
                read_delimited(data, "f", "," if ext == ".csv" else "\t", CATALOG_LANDING_COLUMNS)
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__, getattr(exc, "reason", str(exc))
        return [(r.line, truncate_utf8(r.raw, 4096), r.values, r.error) for r in got]

    rng = random.Random(5)
    for _ in range(60):
        pieces = _JSON_PIECES if ext == ".jsonl" else [p.replace(b",", b"\t") if ext == ".tsv" else p
                                                       for p in _TEXT_PIECES]
        head = b"" if ext == ".jsonl" else b"product_id,title\n".replace(b",", b"\t" if ext == ".tsv" else b",")
        data = (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + head + b"".join(
            rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        for chunk in (3, 17, 1 << 20):  # lines and rows across chunk boundaries
            monkeypatch.setattr(stream, "CHUNK_BYTES", chunk)
            assert records(data) == whole(data), (chunk, data)


def test_parquet_is_read_in_batches(settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BATCH_ROWS", 2)
    sink = io.BytesIO()
    pq.write_table(pa.table({"product_id": ["p1", "p2", "p1", "p3", "p4"], "title": ["A", "B", "C", None, "E"],
                             "brand": ["x", None, "y", "z", ""]}), sink)
    store.write_bytes(landing(D1, "snapshot.parquet"), sink.getvalue())
    manifest = ingest_dates(settings, [D1])["catalog"]["2026-01-01"]
    assert (manifest["rows_in"], manifest["kept"], manifest["products"]) == (5, 3, 3)
    assert quarantine(store, D1) == [("snapshot.parquet", 3, "duplicate product_id: 'p1' first at line 1"),
                                     ("snapshot.parquet", 4, "field title: missing or null")]
