"""Reader for the Home Depot judgment files exactly as published (ISO-8859-1 quoted CSV).

``relevance`` is the mean of the raters' 1-3 scores: a value outside 1..3, NaN or infinite is an
error naming the file and row, never clamped or graded.
"""
from __future__ import annotations

import contextlib
import csv
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.core.errors import InputError
from pipeline.text.bounded_files import JUDGED_FILE, bounded_lines
from pipeline.text.textnorm import normalize

ENCODING = "iso-8859-1"
HEADER = ("id", "product_uid", "product_title", "search_term", "relevance")
#: The published rating scale; every mean relevance lies within it.
RELEVANCE_MIN, RELEVANCE_MAX = 1.0, 3.0

#: Columns of the table returned by :func:`read_judgments`.
JUDGMENTS_SCHEMA = pa.schema(
    [
        ("row_id", pa.string()),
        ("doc_id", pa.string()),
        ("title_raw", pa.string()),
        ("query_raw", pa.string()),
        ("title", pa.string()),
        ("query", pa.string()),
        ("relevance", pa.float64()),
        ("label", pa.int8()),
    ]
)


def grade(relevance: float) -> int:
    """Mean rater score (1..3) -> NDCG grade, as fixed in the data README (0 Bad .. 3 Excellent)."""
    if relevance < 1.5:
        return 0
    if relevance < 2.0:
        return 1
    if relevance < 2.5:
        return 2
    return 3


@dataclass(frozen=True)
class Judgment:
    """One judged (query, title) pair of the published file."""

    row_id: str
    doc_id: str
    title_raw: str
    query_raw: str
    relevance: float

    @property
    def label(self) -> int:
        """The NDCG grade of this judgment."""
        return grade(self.relevance)


def _relevance(path: Path, raw: str, lineno: int) -> float:
    try:
        relevance = float(raw)
    except ValueError:
        raise InputError(str(path), f"relevance {raw!r} is not a number", row=lineno) from None
    if not (math.isfinite(relevance) and RELEVANCE_MIN <= relevance <= RELEVANCE_MAX):
        raise InputError(str(path), f"relevance {raw!r} is outside the published 1-3 scale", row=lineno)
    return relevance


def _not_the_header(header: list[str]) -> str:
    """Why ``header`` is not the published one, without repeating the file's text (it may be anything)."""
    missing = [name for name in HEADER if name not in {h.strip() for h in header}]
    if missing:
        what = f"lacks column(s) {', '.join(missing)}"
    else:
        what = "has extra columns" if len(header) != len(HEADER) else "has the columns in another order"
    return (f"not a Home Depot judgment file: its header of {len(header)} field(s) {what}; expected "
            f"{','.join(HEADER)}")


def iter_judgments(path: str | Path) -> list[Judgment]:
    """Every row of a judgment file (read within :data:`~pipeline.text.bounded_files.JUDGED_FILE`'s bounds); a
    malformed file stops with file, row and reason."""
    path = Path(path)
    try:
        with contextlib.closing(bounded_lines(path, JUDGED_FILE, ENCODING)) as lines:
            reader = csv.reader(lines)
            header = next(reader, None)
            if header is None:
                raise InputError(str(path), "empty file, expected a header " + ",".join(HEADER))
            if tuple(h.strip() for h in header) != HEADER:
                raise InputError(str(path), _not_the_header(header), row=1)
            out = []
            for lineno, rec in enumerate(reader, start=2):
                if len(rec) != len(HEADER):
                    raise InputError(str(path), f"{len(rec)} fields, expected {len(HEADER)}", row=lineno)
                out.append(Judgment(rec[0], rec[1], rec[2], rec[3], _relevance(path, rec[4], lineno)))
            return out
    except FileNotFoundError:
        raise InputError(str(path), "file not found (check DEEPSENT_DATA_DIR)") from None
    except csv.Error as exc:
        raise InputError(str(path), f"unreadable CSV: {exc}") from None


def read_judgments(path: str | Path) -> pa.Table:
    """A judgment file as a table with raw and normalised text and the integer grade."""
    rows = iter_judgments(path)
    return pa.table(
        {
            "row_id": [r.row_id for r in rows],
            "doc_id": [r.doc_id for r in rows],
            "title_raw": [r.title_raw for r in rows],
            "query_raw": [r.query_raw for r in rows],
            "title": [normalize(r.title_raw) for r in rows],
            "query": [normalize(r.query_raw) for r in rows],
            "relevance": [r.relevance for r in rows],
            "label": [r.label for r in rows],
        },
        schema=JUDGMENTS_SCHEMA,
    )


#: The demo's judged gate set (:data:`pipeline.core.defaults.GATE_SLICE`): the slice of ``judgments_train.csv`` whose
#: queries the click simulator never reads (about one query in this many), as a team keeps a golden set its raters judged.
GATE_SLICE_MODULUS = 10


def is_gate_query(query: str) -> bool:
    """True when ``query`` belongs to the gate slice: chosen by a hash of its content (so two spellings of one
    query, by case, Unicode form or punctuation, always fall on the same side) and fixed for every seed."""
    import hashlib

    from pipeline.text.textnorm import content_key

    digest = hashlib.sha256(content_key(query).encode("utf-8")).hexdigest()
    return int(digest[:8], 16) % GATE_SLICE_MODULUS == 0
