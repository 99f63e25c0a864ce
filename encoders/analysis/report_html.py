"""The report's HTML page: what it shows (:class:`ReportData`) and the self-contained page itself."""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from typing import Sequence

from encoders.analysis.traces import (
    KEYWORD_SHARE,
    KeywordTable,
    TopicAllocation,
    busiest_cells,
    cell_words,
)

_CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #bbb;padding:2px 6px;text-align:center;font-size:13px}
th.row{text-align:left}.kw{background:#ffe08a}b{color:#a00}img{max-width:100%;border:1px solid #ddd}
pre{background:#f5f5f5;padding:.6em}.note{color:#555;font-size:13px}"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _count(n: int | None, limit: float) -> str:
    return "-" if n is None else (f"<b>{n}</b>" if n > limit else str(n))


def keyword_table_html(tables: Sequence[tuple[str, KeywordTable]], share: float = KEYWORD_SHARE) -> str:
    """Tables I-II (and V-VIII side by side): counts per word, bold above ``share``, keywords highlighted."""
    words = tables[0][1].words
    head = "".join(f'<th class="{"kw" if tables[0][1].keywords[k] else ""}">{_e(w)}</th>' for k, w in enumerate(words))
    rows = []
    for label, table in tables:
        limit = share * table.top
        for name, counts in (("left to right", table.left_to_right), ("right to left", table.right_to_left)):
            cells = "".join(f"<td>{_count(n, limit)}</td>" for n in counts)
            rows.append(f'<tr><th class="row">{_e(label)}: cells of top {table.top}, {name}</th>{cells}</tr>')
        marks = "".join(f"<td>{'keyword' if k else ''}</td>" for k in table.keywords)
        rows.append(f'<tr><th class="row">{_e(label)}: keyword (&gt;{share:.0%} both ways)</th>{marks}</tr>')
    return f'<table><tr><th class="row">word</th>{head}</tr>{"".join(rows)}</table>'


def topic_table_html(topics: TopicAllocation) -> str:
    """Cells x keywords (busiest cell first), then Table III itself: queries x cells, the words each cell took."""
    busiest = busiest_cells(topics)
    by_cell = "".join(f'<tr><th class="row">cell {c + 1}</th><td>{n}</td><td style="text-align:left">'
                      f"{_e(cell_words(topics, c))}</td></tr>" for c, n in busiest)
    cells = sorted(topics.by_cell)
    head = "".join(f"<th>cell {c + 1}</th>" for c in cells)
    rows = []
    for query, taken in zip(topics.queries, topics.per_query):
        tds = "".join(f"<td>{_e(', '.join(taken.get(c, [])))}</td>" for c in cells)
        rows.append(f'<tr><th class="row">{_e(query)}</th>{tds}</tr>')
    return (f'<table><tr><th class="row">cell</th><th>queries</th><th>keywords taken (count)</th></tr>{by_cell}</table>'
            f'<div style="overflow-x:auto"><table><tr><th class="row">query</th>{head}</tr>{"".join(rows)}</table></div>')


@dataclass
class TextView:
    """One analysed sentence of the report: its picture, keyword tables and scores."""

    side: str
    text: str
    note: str
    figure: str  # file name of the PNG
    tables: list[tuple[str, KeywordTable]]
    scores: dict[str, float] = field(default_factory=dict)


@dataclass
class ReportData:
    """Everything the HTML page shows (already computed)."""

    heading: str
    facts: list[tuple[str, str]]
    examples: list[list[TextView]]
    topics: TopicAllocation
    topic_text: str
    images: dict[str, bytes]
    cost_image: str | None
    notes: list[str]


def build_report(data: ReportData) -> str:
    """The self-contained HTML page (images inlined as data URIs)."""
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(data.heading)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_e(data.heading)}</h1><table>"]
    parts += [f'<tr><th class="row">{_e(k)}</th><td style="text-align:left">{_e(v)}</td></tr>' for k, v in data.facts]
    parts.append("</table><h2>1. Activations and keywords (paper Figs. 4-6, Tables I-II, V-VIII)</h2>")
    for number, views in enumerate(data.examples, start=1):
        parts.append(f"<h3>Example {number}: query &ldquo;{_e(views[0].text)}&rdquo;</h3>")
        for view in views:
            scores = "; ".join(f"{m}: R(Q,D) = {s:.3f}" for m, s in view.scores.items())
            parts.append(f'<h4>{_e(view.note)}: &ldquo;{_e(view.text)}&rdquo;</h4><p class="note">{_e(scores)}</p>')
            parts.append(_img(data.images[view.figure], f"gates of {view.side} '{view.text}'"))
            parts.append(keyword_table_html(view.tables))
    parts.append("<h2>2. Topic allocation (paper Table III)</h2>")
    parts.append(f"<pre>{_e(data.topic_text)}</pre>{topic_table_html(data.topics)}")
    parts.append("<h2>3. Training cost (paper Fig. 7)</h2>")
    parts.append(_img(data.images[data.cost_image], "training cost per epoch") if data.cost_image
                 else "<p>No training-cost history in MLflow.</p>")
    parts.append("<h2>How to read this</h2><ul>" + "".join(f"<li>{_e(n)}</li>" for n in data.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
