"""The search page of ``deepsent serve`` (``GET /``): a query box, the served mode's top k beside BM25's.

Rendered on the server as one HTML document with its style inline: no script, no external asset, and every text
that came from a request or the index escaped (the response's Content-Security-Policy allows nothing else).
"""
from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the page imports nothing of the search layer at run time
    from deepsent.server.loaded import Hit

#: The page's Content-Security-Policy: inline style only, forms sent back here, nothing loaded from anywhere.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

_STYLE = """
body{font:15px/1.4 system-ui,sans-serif;margin:24px;color:#1d1d1f;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}.facts{color:#555;margin:0 0 16px}
form{display:flex;gap:8px;margin-bottom:18px}input[type=search]{flex:1;font-size:16px;padding:6px 8px}
select,input[type=number],button{font-size:15px;padding:5px 8px}input[type=number]{width:5em}
.columns{display:grid;grid-template-columns:1fr 1fr;gap:24px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid #e3e3e3;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f0f0f3;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.error{color:#a00000;font-weight:600}.empty{color:#777}
"""


def render(facts: dict[str, Any] | None, query: str, k: int, mode: str, modes: tuple[str, ...],
           columns: list[tuple[str, list[Hit]]], error: str = "") -> str:
    """The page: the form (filled with ``query``, ``k``, ``mode``), then each of ``columns`` (a heading and its
    hits) side by side; ``error`` shown above them; ``facts``: the model and build served (None while loading)."""
    served = ("loading the index…" if facts is None else
              f"{facts['model']}, {facts['model_uri']} version {facts['version']}, build {facts['build']}, "
              f"{facts['titles']:,} titles; default mode {facts['default_mode']}")
    options = "".join(f'<option value="{escape(name)}"{" selected" if name == mode else ""}>{escape(name)}</option>'
                      for name in modes)
    body = [f'<h1>deepsent search</h1><p class="facts">{escape(served)}</p>',
            '<form method="get" action="/">'
            f'<input type="search" name="q" value="{escape(query)}" placeholder="a product search" autofocus>'
            f'<select name="mode" aria-label="mode">{options}</select>'
            f'<input type="number" name="k" value="{k}" min="1" aria-label="k"><button type="submit">Search</button>'
            '</form>']
    if error:
        body.append(f'<p class="error">{escape(error)}</p>')
    if columns:
        body.append('<div class="columns">' + "".join(_column(name, hits) for name, hits in columns) + "</div>")
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(query + ' – ' if query else '')}deepsent search</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(body)}</body></html>")


def _column(name: str, hits: list[Hit]) -> str:
    """One column: its heading and a table of its hits (rank, product id, title, score, found by)."""
    if not hits:
        return f'<section><h2>{escape(name)}</h2><p class="empty">no title found</p></section>'
    rows = "".join(f'<tr><td class="num">{hit.rank}</td><td>{escape(str(hit.doc_id))}</td>'
                   f'<td>{escape(str(hit.title))}</td><td class="num">{hit.score:.4f}</td>'
                   f'<td>{escape(str(hit.found_by))}</td></tr>' for hit in hits)
    return (f"<section><h2>{escape(name)}</h2><table><thead><tr><th>#</th><th>product id</th><th>title</th>"
            f"<th>score</th><th>found by</th></tr></thead><tbody>{rows}</tbody></table></section>")
