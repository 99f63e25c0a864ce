"""Judged-set loader: the Home Depot files as published, the generic CSV/Parquet format, clear errors."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval.judgments import MAX_GRADE, detect_format, load_judged_set
from pipeline.core.errors import InputError


def _write_csv(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def test_real_dev_set_loads_as_published(settings) -> None:
    judged = load_judged_set(settings.dev_judgments)
    assert judged.fmt == "homedepot" == detect_format(settings.dev_judgments)
    assert len(judged) == 5560 and judged.num_queries == 500  # data README
    assert set(judged.label.tolist()) == {0, 1, 2, 3}
    assert all(d.isdigit() for d in judged.doc_id)
    assert judged.title[0] == judged.title[0].lower()
    assert judged.digest() == load_judged_set(settings.dev_judgments).digest()


def test_generic_csv_groups_by_query_and_normalises(tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path / "j.csv",
        "query,title,label,doc_id\nRed Drill,Cordless DRILL red,3,b\nred drill,Hammer,0,a\nRed Drill,Saw,1,a\n",
    )
    judged = load_judged_set(path)
    assert judged.fmt == "generic"
    assert judged.qid.tolist() == [0, 1, 0]  # grouped by the query as written
    assert judged.query == ["red drill", "red drill", "red drill"]
    assert judged.title[0] == "cordless drill red"
    assert judged.label.tolist() == [3, 0, 1]
    assert judged.tie_rank.tolist() == [1, 0, 0]  # string ids: "a" < "b"


def test_generic_parquet_without_doc_id_uses_the_title(tmp_path: Path) -> None:
    path = tmp_path / "j.parquet"
    pq.write_table(pa.table({"query": ["q", "q"], "title": ["b title", "a title"], "label": [1, 2]}), path)
    judged = load_judged_set(path)
    assert judged.doc_id == ["b title", "a title"]
    assert judged.tie_rank.tolist() == [1, 0]


@pytest.mark.parametrize(
    ("text", "row", "reason"),
    [
        ("query,title\nq,t\n", 1, "missing column"),
        ("query,title,label\nq,t,2\nq,u,high\n", 3, "not an integer grade"),
        ("query,title,label\nq,t,-1\n", 2, "not an integer grade"),
        ("query,title,label\nq,t,1\n  ,u,1\n", 3, "empty or missing query"),
        ("query,title,label,doc_id\nq,t,1,7\nq,u,2,7\n", 3, "duplicate judgment"),
        ("query,title,label\nq,t,1,extra\n", 2, "wrong number of fields"),
        ("query,title,label,doc_id\nq,t,1,7\nq,u,2,\n", 3, "doc_id is empty"),
    ],
)
def test_bad_generic_rows_name_file_row_and_reason(tmp_path: Path, text: str, row: int, reason: str) -> None:
    path = _write_csv(tmp_path / "bad.csv", text)
    with pytest.raises(InputError) as err:
        load_judged_set(path)
    assert err.value.row == row and reason in err.value.reason
    assert str(path) in str(err.value)


@pytest.mark.parametrize("label", ["\u00b2", "\u0663", "11", "1023", "99999999999999999999999"])
def test_generic_label_outside_0_to_10_or_not_ascii_digits_is_an_error(tmp_path: Path, label: str) -> None:
    # "\u00b2" (superscript two) used to crash int() with a traceback, "\u0663" (Arabic-Indic three)
    # loaded as grade 3, and 1023 loaded and overflowed the gain 2^g - 1 in NDCG
    path = _write_csv(tmp_path / "bad.csv", f"query,title,label\nq,t,{MAX_GRADE}\nq,u,{label}\n")
    with pytest.raises(InputError, match=f"label .* is not an integer grade 0..{MAX_GRADE}") as err:
        load_judged_set(path)
    assert err.value.row == 3 and str(path) in str(err.value)


@pytest.mark.parametrize("labels", [[MAX_GRADE, MAX_GRADE + 1], [0.0, 1023.0]])
def test_generic_parquet_label_above_the_highest_grade_is_an_error(tmp_path: Path, labels: list) -> None:
    path = tmp_path / "j.parquet"
    pq.write_table(pa.table({"query": ["q", "q"], "title": ["a", "b"], "label": labels}), path)
    with pytest.raises(InputError, match="row 2: label .* is not an integer grade 0..10"):
        load_judged_set(path)


@pytest.mark.parametrize(
    ("text", "row", "reason"),
    [
        ("", None, "empty file, expected a header query,title,label[,doc_id]"),
        ("query,title,label,label\nq,t,1,2\n", 1, "column label appears twice in the header"),  # used to keep the last
    ],
    ids=["empty_file", "duplicate_column"],
)
def test_malformed_generic_header_names_file_row_and_reason(tmp_path: Path, text: str, row: int | None, reason: str) -> None:
    path = _write_csv(tmp_path / "bad.csv", text)
    with pytest.raises(InputError) as err:
        load_judged_set(path)
    assert (err.value.row, err.value.reason) == (row, reason) and str(path) in str(err.value)


def test_a_directory_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "set.csv").mkdir()
    for fmt in (None, "homedepot", "generic"):
        with pytest.raises(InputError, match="set.csv: not a file"):
            load_judged_set(tmp_path / "set.csv", fmt)


def test_generic_csv_with_a_utf8_byte_order_mark_loads(tmp_path: Path) -> None:
    # a BOM (as Excel writes) used to hide the first column: "missing column(s) query"
    path = _write_csv(tmp_path / "bom.csv", "\ufeffquery,title,label\nq,t,1\n")
    judged = load_judged_set(path)
    assert judged.query_raw == ["q"] and judged.label.tolist() == [1]


@pytest.mark.parametrize(("column", "values"), [("query", [1, 2]), ("title", [b"a", b"b"])])
def test_generic_parquet_text_of_the_wrong_type_is_named(tmp_path: Path, column: str, values: list) -> None:
    # used to say "empty or missing query" about a column full of numbers
    columns = {"query": ["q", "q"], "title": ["a", "b"], "label": [1, 0], column: values}
    path = tmp_path / "j.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(InputError, match=f"row 1: {column} {values[0]!r} is not text"):
        load_judged_set(path)


def test_non_utf8_generic_csv_is_a_clear_error(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "latin.csv", "query,title,label\ncaf\u00e9,t,1\n", encoding="iso-8859-1")
    with pytest.raises(InputError, match="not UTF-8"):
        load_judged_set(path, fmt="generic")


def _home_depot_csv(path: Path, relevance: str) -> Path:
    header = '"id","product_uid","product_title","search_term","relevance"\n'
    return _write_csv(path, header + f'1,100,"Drill","drill",3\n2,101,"Saw","drill",{relevance}\n', "iso-8859-1")


def test_home_depot_format_errors_come_from_the_published_reader(tmp_path: Path) -> None:
    path = _home_depot_csv(tmp_path / "hd.csv", "abc")
    assert detect_format(path) == "homedepot"
    with pytest.raises(InputError, match="row 3: relevance 'abc' is not a number"):
        load_judged_set(path)


@pytest.mark.parametrize("relevance", ["nan", "inf", "-inf", "7.0", "-1", "0.99", "3.01"])
def test_home_depot_relevance_outside_the_published_scale_is_an_error(tmp_path: Path, relevance: str) -> None:
    # nan used to become grade 3 (Excellent), 7.0 and -1 were clamped to 3 and 0 without a word
    path = _home_depot_csv(tmp_path / "hd.csv", relevance)
    with pytest.raises(InputError, match="relevance .* outside the published 1-3 scale") as err:
        load_judged_set(path)
    assert err.value.row == 3 and str(path) in str(err.value)


@pytest.mark.parametrize(("relevance", "label"), [("1", 0), ("1.49", 0), ("1.5", 1), ("2.0", 2), ("2.5", 3), ("3", 3)])
def test_home_depot_relevance_on_the_scale_keeps_its_grade(tmp_path: Path, relevance: str, label: int) -> None:
    assert load_judged_set(_home_depot_csv(tmp_path / "hd.csv", relevance)).label.tolist() == [3, label]


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_judged_set(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="unknown judgments format"):
        load_judged_set(tmp_path / "nope.csv", fmt="trec")


def test_a_bad_generic_row_is_named_by_its_line_after_blank_lines_and_quoted_line_breaks(tmp_path: Path) -> None:
    path = tmp_path / "gaps.csv"
    path.write_text('query,title,label\ndrill,cordless drill,2\n\nhose,"garden hose\nreel",1\nsaw,miter saw,x\n',
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"gaps\.csv, row 6: label 'x' is not an integer grade"):
        load_judged_set(path, "generic")
