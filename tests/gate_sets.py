"""Judged gate sets for promotion tests: a team's own set, never the dev set the comparison reports.

The gate refuses any set that shares a judged (query, title) pair with ``judgments_dev.csv``
(``eval.gate.refuse_reported_set``), so the tests gate on queries of ``judgments_train.csv`` judged like the
dev set's (at least 10 titles and 3 relevance values each: most training queries have a few titles, all
relevant, which no ranking tells apart), kept in the publishers' format. Training and dev judgments share no query.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from pipeline.core.config import Settings

ENCODING = "iso-8859-1"


def train_gate_set(settings: Settings, target: Path, queries: int = 500) -> Path:
    """The last ``queries`` queries of judgments_train.csv judged like the dev set's, with all their judgments,
    written to ``target``."""
    if target.exists():
        return target
    with open(settings.train_judgments, encoding=ENCODING, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    col = header.index("search_term")
    relevance: dict[str, list[str]] = defaultdict(list)
    for row in body:
        relevance[row[col]].append(row[header.index("relevance")])
    graded = [q for q, values in relevance.items() if len(values) >= 10 and len(set(values)) >= 3]
    keep = set(graded[-queries:])
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding=ENCODING, newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(r for r in body if r[col] in keep)
    return target
