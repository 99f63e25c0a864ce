"""Landing readers (JSONL, CSV/TSV, Parquet, TREC Session XML) and landing-row validation."""
from __future__ import annotations

import datetime as dt
import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.errors import InputError
from pipeline.ingest.formats import READERS, RowError, reader_for, to_landing_row
from pipeline.ingest.formats.delimited import read_csv, read_tsv
from pipeline.ingest.formats.jsonl import read_jsonl
from pipeline.ingest.formats.parquet import read_parquet
from pipeline.ingest.formats.records import MAX_LINE_BYTES
from pipeline.ingest.formats.trec_xml import read_trec_xml
from pipeline.storage.schemas import LANDING_FIELDS

FIXTURES = Path(__file__).parent / "fixtures"
DAY = dt.date(2026, 1, 1)


def landing(**changes: Any) -> dict[str, Any]:
    """A valid landing row, with ``changes`` applied."""
    row = {
        "ts": "2026-01-01T10:00:00.000+00:00", "user_id": "u1", "session_id": "s1", "impression_id": "s1.1",
        "query": "Cordless Drill", "doc_id": "100001", "title": "20V MAX Drill", "position": 1, "clicked": True,
    }
    return {**row, **changes}


def jsonl(*rows: Any) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode("utf-8")


def delimited(rows: list[list[Any]], sep: str = ",") -> bytes:
    import csv

    out = io.StringIO()
    writer = csv.writer(out, delimiter=sep, lineterminator="\n")
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


# ---- JSONL ----------------------------------------------------------------------------------
def test_jsonl_good_and_malformed_lines_keep_their_line_numbers() -> None:
    good = json.dumps(landing())
    data = jsonl(good, good[:40], "", "[1, 2]", landing(extra="ignored"))
    records = read_jsonl(data, "landing/x.jsonl")
    assert [r.line for r in records] == [1, 2, 3, 4, 5]
    assert records[0].error is None and records[0].values == landing()
    assert records[1].error.startswith("invalid JSON") and records[1].raw == good[:40]
    assert records[2].error == "blank line"
    assert records[3].error == "expected a JSON object, got list"
    assert records[4].error is None


def test_jsonl_one_megabyte_line_is_rejected_unparsed() -> None:
    huge = json.dumps(landing(title="x" * (1 << 20)))
    records = read_jsonl(jsonl(landing(), huge, landing()), "big.jsonl")
    assert [r.error is None for r in records] == [True, False, True]
    assert f"over the limit of {MAX_LINE_BYTES} bytes" in records[1].error
    assert len(records[1].raw) <= 4096


def test_jsonl_single_non_utf8_line_is_quarantined_but_a_latin1_file_stops() -> None:
    latin1 = json.dumps(landing(title="Drill 90°"), ensure_ascii=False).encode("latin-1")
    data = jsonl(landing()) + latin1 + b"\n" + jsonl(landing())
    records = read_jsonl(data, "one-bad.jsonl")
    assert records[1].error == "line is not valid UTF-8" and "\\xb0" in records[1].raw
    with pytest.raises(InputError, match=r"latin\.jsonl: wrong encoding: 2 of 3 lines are not valid UTF-8"):
        read_jsonl(latin1 + b"\n" + jsonl(landing()) + latin1 + b"\n", "latin.jsonl")


def test_jsonl_huge_number_and_deep_nesting_are_invalid_lines_not_crashes() -> None:
    huge = json.dumps(landing()).replace('"position": 1', '"position": ' + "9" * 5000)
    records = read_jsonl(jsonl(huge, "[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000, landing()), "x.jsonl")
    assert [r.error for r in records] == [
        "invalid JSON: Exceeds the limit (4300 digits) for integer string conversion",
        "invalid JSON: arrays or objects nested too deeply",
        "invalid JSON: arrays or objects nested too deeply",
        None,
    ]


@pytest.mark.parametrize("extension", sorted(READERS))
def test_empty_file_is_an_error_naming_the_file(extension: str) -> None:
    name = f"landing/clicks/dt=2026-01-01/part-0{extension}"
    with pytest.raises(InputError, match=rf"part-0{extension}: empty file \(0 bytes\)"):
        reader_for(name)(b"", name, DAY)


def test_utf16_file_is_a_wrong_encoding_error() -> None:
    with pytest.raises(InputError, match="u16.jsonl: wrong encoding: UTF-16"):
        read_jsonl(json.dumps(landing()).encode("utf-16"), "u16.jsonl")


def test_unknown_extension_is_an_error() -> None:
    with pytest.raises(InputError, match=r"x\.avro: unsupported file type '\.avro'"):
        reader_for("x.avro")


# ---- CSV / TSV ------------------------------------------------------------------------------
def test_csv_rows_quoted_multiline_field_and_short_row() -> None:
    header = list(LANDING_FIELDS)
    row = [str(v).lower() if isinstance(v, bool) else v for v in landing().values()]
    multiline = list(row)
    multiline[6] = "Drill\nwith a newline"
    data = delimited([header, row, multiline, row[:-3], row])
    records = read_csv(data, "x.csv")
    assert [r.line for r in records] == [2, 3, 5, 6]
    assert records[1].values["title"] == "Drill\nwith a newline"
    assert records[2].error == "6 fields, expected 9 as in the header"
    assert to_landing_row(records[0].values) == to_landing_row(landing())


def test_tsv_reads_tabs() -> None:
    header = list(LANDING_FIELDS)
    row = [str(v) for v in landing(clicked=0).values()]
    records = read_tsv(delimited([header, row], "\t"), "x.tsv")
    assert to_landing_row(records[0].values).clicked is False


def test_csv_missing_column_stops_with_file_and_row() -> None:
    header = [c for c in LANDING_FIELDS if c != "doc_id"]
    with pytest.raises(InputError, match=r"x\.csv, row 1: missing column\(s\) doc_id"):
        read_csv(delimited([header, ["a"] * len(header)]), "x.csv")


def test_csv_in_latin1_stops_with_wrong_encoding() -> None:
    header = ",".join(LANDING_FIELDS)
    line = "2026-01-01T10:00:00+00:00,u,s,i,q,d,Drill 90°,1,0"
    data = (header + "\n" + "\n".join([line] * 3) + "\n").encode("latin-1")
    with pytest.raises(InputError, match=r"hd\.csv: wrong encoding: 3 of 3 lines"):
        read_csv(data, "hd.csv")


def test_csv_one_megabyte_row_is_quarantined() -> None:
    header = list(LANDING_FIELDS)
    row = [str(v) for v in landing().values()]
    huge = list(row)
    huge[6] = "y" * (1 << 20)
    records = read_csv(delimited([header, row, huge, row]), "big.csv")
    assert [r.line for r in records] == [2, 3, 4]
    assert "over the limit" in records[1].error and records[2].error is None


# ---- Parquet ----------------------------------------------------------------------------------
def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_parquet_rows_and_wrong_types_reach_validation() -> None:
    rows = [landing(), landing(position="abc"), landing(clicked=None)]
    table = pa.table({k: [str(r[k]) if k == "position" else r[k] for r in rows] for k in LANDING_FIELDS})
    records = read_parquet(parquet_bytes(table), "x.parquet")
    assert [r.line for r in records] == [1, 2, 3]
    assert to_landing_row(records[0].values).position == 1
    with pytest.raises(RowError, match="field position: expected an integer, got str 'abc'"):
        to_landing_row(records[1].values)
    with pytest.raises(RowError, match=r"missing or null field\(s\): clicked"):
        to_landing_row(records[2].values)


@pytest.mark.parametrize(
    ("column", "array"),
    [
        ("ts", pa.array([1767261600000, 10**18], pa.timestamp("ms", tz="UTC"))),  # the second is ~31 million years on
        ("ts", pa.array([1767261600000, -62135596800000], pa.timestamp("ms", tz="Pacific/Kiritimati"))),
        ("ts", pa.array([20454, 2**31 - 1], pa.date32())),
        ("position", pa.array([1, 10**15], pa.duration("s"))),
    ],
)
def test_parquet_value_python_cannot_hold_costs_its_row(column: str, array: pa.Array) -> None:
    table = pa.table({k: array if k == column else [v, v] for k, v in landing().items()})
    first, second = read_parquet(parquet_bytes(table), "x.parquet")
    assert first.error is None and first.values[column] == array[0].as_py()
    assert second.values is None and second.line == 2
    assert second.error.startswith(f"field {column}: unreadable {array.type} {array[1].value} (")
    assert json.loads(second.raw)[column] == f"<{array.type} {array[1].value}>"


def test_parquet_missing_column_and_garbage_stop() -> None:
    table = pa.table({k: [v] for k, v in landing().items() if k != "ts"})
    with pytest.raises(InputError, match=r"x\.parquet: missing column\(s\) ts"):
        read_parquet(parquet_bytes(table), "x.parquet")
    with pytest.raises(InputError, match=r"y\.parquet: unreadable Parquet"):
        read_parquet(b"PAR1 this is not parquet", "y.parquet")


# ---- TREC Session XML -----------------------------------------------------------------------
def test_trec_xml_flattens_to_landing_rows() -> None:
    records = read_trec_xml((FIXTURES / "trec_small.xml").read_bytes(), "trec.xml", DAY)
    values = [r.values for r in records]
    assert [(v["impression_id"], v["position"], v["clicked"]) for v in values] == [
        ("7.1", "1", False), ("7.1", "2", True), ("7.1", "3", False), ("7.2", "1", False)
    ]
    assert values[0]["ts"] == "2026-01-01T00:00:10.500+00:00" and values[3]["ts"] == "2026-01-01T00:01:35.250+00:00"
    assert values[0]["user_id"] == values[0]["session_id"] == "7"
    assert values[0]["query"] == "Cordless  Drill" and values[0]["title"] == "Drills & Drivers"
    assert values[1]["doc_id"] == "clueweb12-b"
    assert records[0].line == 9
    with pytest.raises(RowError, match="field title: empty"):
        to_landing_row(values[2])


@pytest.mark.parametrize("starttime", ["inf", "nan", "1e300", "-1e12"])
def test_trec_xml_starttime_without_a_representable_time_costs_its_rows(starttime: str) -> None:
    xml = (FIXTURES / "trec_small.xml").read_bytes().replace(b'num="2" starttime="95.25"', f'num="2" starttime="{starttime}"'.encode())
    records = read_trec_xml(xml, "trec.xml", DAY)
    assert [r.error for r in records[:3]] == [None, None, None]
    shown = f"{float(starttime):g}"
    assert (records[3].line, records[3].values) == (40, None)
    assert records[3].error == f"field ts: session starttime 0 + interaction starttime {shown} s is out of range"


def test_trec_xml_malformed_or_foreign_stops_with_line() -> None:
    broken = (FIXTURES / "trec_small.xml").read_bytes().replace(b"</results>", b"", 1)
    with pytest.raises(InputError, match=r"trec\.xml, row \d+: malformed XML: mismatched tag"):
        read_trec_xml(broken, "trec.xml", DAY)
    with pytest.raises(InputError, match=r"other\.xml, row 1: unusable TREC Session log: root element <rss>"):
        read_trec_xml(b"<rss><channel/></rss>", "other.xml", DAY)


# ---- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"doc_id": None}, r"missing or null field\(s\): doc_id"),
        ({"position": "3rd"}, "field position: expected an integer"),
        ({"position": 0}, "field position: 0 is not a 1-based rank"),
        ({"position": True}, "field position: expected an integer, got bool"),
        ({"position": 2**31}, r"^field position: 2147483648 is over the int32 limit of 2147483647$"),
        ({"position": "2147483648"}, r"^field position: 2147483648 is over the int32 limit of 2147483647$"),
        ({"position": "9" * 5000}, r"^field position: '9{30,}\.\.\. is over the int32 limit of 2147483647$"),
        ({"position": "²"}, r"^field position: expected an integer, got str '²'$"),
        ({"position": "٣"}, r"^field position: expected an integer, got str '٣'$"),
        ({"clicked": "maybe"}, "field clicked: expected true/false or 0/1"),
        ({"ts": "2026-01-01 10:00:00"}, "field ts: '2026-01-01 10:00:00' has no timezone"),
        ({"ts": "yesterday"}, "field ts: 'yesterday' is not an ISO-8601 timestamp"),
        ({"query": "   "}, "field query: empty"),
        ({"user_id": 17}, "field user_id: expected a string, got int"),
        ({"title": "x" * 20000}, "field title: 20000 characters, over the limit"),
        ({"title": "bad \udc80 escape"}, "field title: not valid Unicode"),
    ],
)
def test_invalid_rows_name_the_reason(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(RowError, match=reason):
        to_landing_row(landing(**changes))


def test_text_values_and_timezones_are_converted() -> None:
    row = to_landing_row(landing(position="4", clicked="true", ts="2026-01-01T11:00:00+01:00"))
    assert (row.position, row.clicked) == (4, True)
    assert row.ts_ms == to_landing_row(landing(ts="2026-01-01T10:00:00Z")).ts_ms
    stamp = dt.datetime(2026, 1, 1, 10, tzinfo=dt.timezone.utc)
    assert to_landing_row(landing(ts=stamp)).ts_ms == row.ts_ms == int(stamp.timestamp() * 1000)


def test_timestamp_window_is_checked_only_against_a_landing_date() -> None:
    utc = dt.timezone.utc
    for stamp in (dt.datetime(1, 1, 1, tzinfo=utc), dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.timezone(-dt.timedelta(hours=23)))):
        assert to_landing_row(landing(ts=stamp)).ts_ms == int((stamp - dt.datetime(1970, 1, 1, tzinfo=utc)).total_seconds()) * 1000
        with pytest.raises(RowError, match=rf"^field ts: '{re.escape(stamp.isoformat())}' is outside the landing date 2026-01-01 ± 1 day \(UTC\)$"):
            to_landing_row(landing(ts=stamp), DAY)
    assert to_landing_row(landing(ts="2025-12-31T00:00:00+00:00"), DAY).ts_ms == to_landing_row(landing(ts="2025-12-31T00:00:00Z")).ts_ms
