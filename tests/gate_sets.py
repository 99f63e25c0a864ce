"""Judged gate sets for promotion tests: a team's own set, never the dev set the comparison reports.

The gate refuses any set that shares a query with ``judgments_dev.csv`` or with the click simulator's source
(``eval.decisions.gate_set``), so the tests gate on queries of the gate slice of ``judgments_train.csv`` judged like the
dev set's (at least 10 titles and 3 relevance values each: most training queries have a few titles, all
relevant, which no ranking tells apart), kept in the publishers' format. Training and dev judgments share no query.
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from pipeline.core.config import Settings
from pipeline.text.homedepot import is_gate_query

ENCODING = "iso-8859-1"


def train_gate_set(settings: Settings, target: Path, queries: int = 500) -> Path:
    """The last ``queries`` queries of the gate slice of judgments_train.csv judged like the dev set's (78 in the
    whole file), with all their judgments and one exact-match title each, written to ``target`` (a gate set shares
    no query with the simulator's source, which is the rest of the file)."""
    if target.exists():
        return target
    with open(settings.train_judgments, encoding=ENCODING, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    col = header.index("search_term")
    relevance: dict[str, list[str]] = defaultdict(list)
    for row in body:
        relevance[row[col]].append(row[header.index("relevance")])
    graded = [q for q, values in relevance.items() if len(values) >= 10 and len(set(values)) >= 3 and is_gate_query(q)]
    keep = graded[-queries:]
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding=ENCODING, newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(r for r in body if r[col] in set(keep))
        # each query also judged on a title that is the query itself, graded excellent: a lexical ranker puts it first
        # and a ranking turned upside down last, so the gate's margins between the test models lie beyond the noise
        writer.writerows([f"gate-{n}", f"exact-{n}", query, query, "3"] for n, query in enumerate(keep))
    return target
