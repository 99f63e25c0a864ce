"""Judged test sets: the Home Depot files as published, or a generic CSV/Parquet of judgments.

Generic format: one row per judged (query, title) pair with columns ``query``, ``title``,
``label`` and optionally ``doc_id``; CSV files are UTF-8 (a byte-order mark is allowed) with a
header naming each column once. Every file is read within :data:`~pipeline.text.bounded_files.JUDGED_FILE`'s
bounds (size, lines, line length), streamed. A label is an integer
grade 0..``MAX_GRADE`` (10): ASCII digits in CSV, an integer (or integral float) in Parquet; a
fraction such as 1.5 is refused, never rounded. Home Depot files keep their published 1-3
relevance scale (see :mod:`pipeline.text.homedepot`).
Rows are grouped by the query text as written. Ties in a ranking are broken by ascending
document id (see :func:`tie_ranks`); a set without ``doc_id`` uses the title text as its id.
A bad file stops with an :class:`InputError` naming the file, the row and the reason; no row
is ever dropped.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pyarrow.parquet as pq

from pipeline.core.errors import InputError
from pipeline.core.readable import readable_bytes
from pipeline.text import homedepot
from pipeline.text.bounded_files import JUDGED_FILE, bounded_lines
from pipeline.text.textnorm import normalize

FORMATS = ("homedepot", "generic")
#: Highest grade of a generic set: its gain 2^10 - 1 = 1023 is exact in float64 and no sum of
#: discounted gains can overflow (grades near 1023 make the ideal DCG infinite and NDCG NaN).
MAX_GRADE = 10
GENERIC_REQUIRED = ("query", "title", "label")


@dataclass(frozen=True)
class JudgedSet:
    """Judgments of one test set, one entry per judged (query, title) pair, in file order.

    Attributes:
        name: short name (the file stem).
        source: the file read.
        fmt: ``homedepot`` or ``generic``.
        query_raw: query as written (the grouping key).
        query: normalised query text (what scorers see).
        title: normalised title text.
        doc_id: document id (the title as written when the set has none).
        label: int64 grade per pair.
        qid: int64 query index per pair (order of first appearance).
        tie_rank: int64 position of each pair's doc_id in ascending id order.
    """

    name: str
    source: str
    fmt: str
    query_raw: list[str]
    query: list[str]
    title: list[str]
    doc_id: list[str]
    label: np.ndarray
    qid: np.ndarray
    tie_rank: np.ndarray

    def __len__(self) -> int:
        return len(self.query)

    @property
    def num_queries(self) -> int:
        """Number of distinct queries."""
        return int(self.qid.max()) + 1 if len(self.qid) else 0

    @property
    def queries(self) -> list[str]:
        """The query text as written, indexed by ``qid``."""
        out = [""] * self.num_queries
        for q, raw in zip(self.qid.tolist(), self.query_raw):
            out[q] = raw
        return out

    def require_graded_queries(self, minimum: int = 2) -> None:
        """Stop with an InputError unless ``minimum`` queries have a positive grade (NDCG is 0/0 for the rest)."""
        graded = np.unique(self.qid[self.label > 0]).size
        if graded < minimum:
            raise InputError(
                self.source,
                f"{graded} of {self.num_queries} queries have a title with a positive grade; "
                f"NDCG with a paired significance test needs at least {minimum}",
            )

    def digest(self) -> str:
        """SHA-256 of the judgments' content (stable across runs and machines)."""
        h = hashlib.sha256()
        for row in zip(self.query_raw, self.doc_id, self.title, self.label.tolist()):
            h.update(repr(row).encode("utf-8"))
        return h.hexdigest()


def tie_ranks(doc_ids: Sequence[str]) -> np.ndarray:
    """Rank of each id in ascending order: numeric when every id is all digits, else by string."""
    distinct = set(doc_ids)
    numeric = bool(distinct) and all(d.isdigit() for d in distinct)
    ordered = sorted(distinct, key=int) if numeric else sorted(distinct)
    position = {d: i for i, d in enumerate(ordered)}
    return np.fromiter((position[d] for d in doc_ids), dtype=np.int64, count=len(doc_ids))


def detect_format(path: Path) -> str:
    """``homedepot`` when the file has the published Home Depot header, else ``generic``."""
    if path.suffix.lower() != ".csv":
        return "generic"
    try:
        with contextlib.closing(bounded_lines(path, JUDGED_FILE, homedepot.ENCODING)) as lines:
            header = next(csv.reader(lines), None)
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except csv.Error as exc:
        raise InputError(str(path), f"unreadable CSV: {exc}") from None
    if header and tuple(h.strip() for h in header) == homedepot.HEADER:
        return "homedepot"
    return "generic"


def load_judged_set(path: str | Path, fmt: str | None = None) -> JudgedSet:
    """Read a judged set; ``fmt`` is ``homedepot``, ``generic`` or None to detect it."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise InputError(str(path), "not a file")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(str(path), f"unknown judgments format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "homedepot":
        return homedepot_set(path)
    if path.suffix.lower() == ".parquet":
        return _build(path, fmt, _parquet_rows(path))
    return _build(path, fmt, _csv_rows(path))


def homedepot_set(path: Path, keep: Callable[[str], bool] | None = None, name: str | None = None) -> JudgedSet:
    """A Home Depot file as a judged set; with ``keep``, only the rows whose query (as written) it keeps, named
    ``name`` (the demo's gate slice)."""
    table = homedepot.read_judgments(path)
    rows = zip(itertools.count(2), table.column("query_raw").to_pylist(), table.column("title_raw").to_pylist(),
               table.column("label").to_pylist(), table.column("doc_id").to_pylist())
    if keep is not None:
        rows = (row for row in rows if keep(row[1]))
    judged = _build(path, "homedepot", rows)
    return judged if name is None else dataclasses.replace(judged, name=name, source=f"{path} ({name})")


def _csv_rows(path: Path) -> Iterable[tuple[int, object, object, object, object]]:
    """(line, query, title, label, doc_id) per record; ``line`` is where the record starts in the file,
    counting blank lines (which the CSV reader skips) and line breaks inside quoted fields."""
    try:
        with contextlib.closing(bounded_lines(path, JUDGED_FILE)) as lines:  # a byte-order mark is dropped
            reader = csv.DictReader(lines)
            _check_columns(path, reader.fieldnames or [])
            for rec in reader:
                breaks = sum(v.count("\n") for v in rec.values() if isinstance(v, str))
                line = reader.line_num - breaks
                if None in rec or any(v is None for v in rec.values()):
                    yield line, None, None, None, None  # wrong field count, reported by _build
                    continue
                yield line, rec["query"], rec["title"], rec["label"], rec.get("doc_id")
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except csv.Error as exc:
        raise InputError(str(path), f"unreadable CSV: {exc}") from None


def _parquet_rows(path: Path) -> Iterable[tuple[int, object, object, object, object]]:
    """(row, query, title, label, doc_id) per row of a Parquet set, its size and rows within :data:`JUDGED_FILE`."""
    try:
        if path.stat().st_size > JUDGED_FILE.max_bytes:
            raise InputError(str(path), f"more than {readable_bytes(JUDGED_FILE.max_bytes)}, the most deepsent reads "
                             f"of {JUDGED_FILE.what}; split it")
        if pq.ParquetFile(path).metadata.num_rows > JUDGED_FILE.max_lines:
            raise InputError(str(path), f"more than {JUDGED_FILE.max_lines:,} rows, the most deepsent reads of "
                             f"{JUDGED_FILE.what}; split it")
        table = pq.read_table(path)
    except FileNotFoundError:
        raise InputError(str(path), "file not found") from None
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(str(path), f"unreadable Parquet: {exc}") from None
    _check_columns(path, table.column_names)
    doc_ids = table.column("doc_id").to_pylist() if "doc_id" in table.column_names else [None] * table.num_rows
    return zip(
        itertools.count(1),
        table.column("query").to_pylist(),
        table.column("title").to_pylist(),
        table.column("label").to_pylist(),
        doc_ids,
    )


def _check_columns(path: Path, columns: Sequence[str]) -> None:
    if not columns:
        raise InputError(str(path), "empty file, expected a header query,title,label[,doc_id]")
    twice = [c for i, c in enumerate(columns) if c in columns[:i]]
    if twice:
        raise InputError(str(path), f"column {twice[0]} appears twice in the header", row=1)
    missing = [c for c in GENERIC_REQUIRED if c not in columns]
    if missing:
        raise InputError(
            str(path), f"missing column(s) {', '.join(missing)}; a generic judged set needs query, title, label [, doc_id]", row=1
        )


def _parse_label(value: object) -> int | None:
    """A grade 0..MAX_GRADE from an int, an integral float or ASCII digits; None when invalid (never rounded)."""
    if isinstance(value, bool) or value is None:
        grade = None
    elif isinstance(value, (int, np.integer)):
        grade = int(value)
    elif isinstance(value, float):
        grade = int(value) if value.is_integer() else None
    else:
        text = str(value).strip()
        grade = int(text) if text.isascii() and text.isdigit() else None
    return grade if grade is not None and 0 <= grade <= MAX_GRADE else None


def _build(path: Path, fmt: str, rows: Iterable[tuple[int, object, object, object, object]]) -> JudgedSet:
    """The judged set of ``(row, query, title, label, doc_id)`` records, each checked (file, row, reason)."""
    query_raw: list[str] = []
    title_raw: list[str] = []
    doc_ids: list[str | None] = []
    labels: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    rownums: list[int] = []
    for rownum, query, title, label, doc_id in rows:
        if query is None and title is None and label is None:
            raise InputError(str(path), "wrong number of fields", row=rownum)
        grade = _parse_label(label)
        if grade is None:
            raise InputError(str(path), f"label {label!r} is not an integer grade 0..{MAX_GRADE}", row=rownum)
        for column, value in (("query", query), ("title", title)):
            if value is not None and not isinstance(value, str):
                raise InputError(str(path), f"{column} {value!r} is not text", row=rownum)
            if not value or not normalize(value):
                raise InputError(str(path), f"empty or missing {column}", row=rownum)
        doc = str(doc_id).strip() if doc_id is not None and str(doc_id).strip() else None
        key = (str(query), doc if doc is not None else str(title))
        if key in seen:
            raise InputError(str(path), f"duplicate judgment of document {key[1]!r} for query {key[0]!r} (first at row {seen[key]})", row=rownum)
        seen[key] = rownum
        rownums.append(rownum)
        query_raw.append(str(query))
        title_raw.append(str(title))
        doc_ids.append(doc)
        labels.append(grade)
    if not labels:
        raise InputError(str(path), "no judgments in the file")
    if any(d is None for d in doc_ids) and not all(d is None for d in doc_ids):
        first = next(r for r, d in zip(rownums, doc_ids) if d is None)
        raise InputError(str(path), "doc_id is empty on some rows but not all", row=first)
    ids = [d if d is not None else t for d, t in zip(doc_ids, title_raw)]
    qindex: dict[str, int] = {}
    qid = np.fromiter((qindex.setdefault(q, len(qindex)) for q in query_raw), dtype=np.int64, count=len(query_raw))
    return JudgedSet(
        name=path.stem,
        source=str(path),
        fmt=fmt,
        query_raw=query_raw,
        query=[normalize(q) for q in query_raw],
        title=[normalize(t) for t in title_raw],
        doc_id=ids,
        label=np.asarray(labels, dtype=np.int64),
        qid=qid,
        tie_rank=tie_ranks(ids),
    )
