"""The comparison table (Markdown, CSV, HTML), its bar chart, and their MLflow run (Table IV); the retrieval tables
of ``compare --retrieval`` as Markdown (:func:`retrieval_markdown`, :func:`split_markdown`).

Rows are the dicts built by :mod:`eval.compare` (name, settings, params, ``ndcg@k``,
``p@k``, ``ci@k``, ``sig@k``). The files hold no timing, so re-running a comparison writes
the same bytes; timings go to ``timings.json`` and MLflow.
"""
from __future__ import annotations

import csv
import html
import io
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from eval.judgments import JudgedSet
from eval.metrics import KS, NdcgResult
from pipeline.core.config import Settings

BETTER, WORSE, REFERENCE = "\u25b2", "\u25bc", " (ref)"
HEADERS = ["Model", "Settings", "Params"] + [f"NDCG@{k}" for k in KS]


def format_params(params: int | None) -> str:
    """Parameter count as in Table IV (``14.4 M``), a dash when the method has none."""
    if params is None:
        return "\u2014"
    if params >= 1_000_000:
        return f"{params / 1e6:.1f} M"
    if params >= 1_000:
        return f"{params / 1e3:.1f} k"
    return str(params)


def _cell(row: dict[str, Any], k: int) -> str:
    mark = REFERENCE if row.get("reference") else row.get(f"sig@{k}", "")
    return f"{100 * row[f'ndcg@{k}']:.1f}{mark}"


def table_cells(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Display cells of each row, NDCG as percentages with significance marks."""
    return [[r["name"], r["settings"], format_params(r.get("params"))] + [_cell(r, k) for k in KS] for r in rows]


def to_markdown(rows: Sequence[dict[str, Any]], caption: str) -> str:
    """GitHub-flavoured Markdown table with the caption underneath."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = "|" + "|".join([":---"] * 3 + ["---:"] * len(KS)) + "|"
    body = [line(HEADERS), align] + [line(c) for c in table_cells(rows)]
    return "\n".join(body) + f"\n\n{caption}\n"


def metric_header(metric: str) -> str:
    """A retrieval metric's column header: ``recall@10`` -> ``Recall@10``, ``ndcg@10`` -> ``NDCG@10``."""
    return metric.replace("recall", "Recall").replace("ndcg", "NDCG")


def versus_text(versus_row: dict[str, dict[str, Any]] | None, missing: str = "\u2014") -> str:
    """A row's differences (points) and marks at every metric, e.g. ``+2.1▲ / +0.4 / +1.8▲`` (``missing`` when none)."""
    if versus_row is None:
        return missing
    return " / ".join("\u2014" if v["diff"] is None else f"{100 * v['diff']:+.1f}{v['mark']}" for v in versus_row.values())


def _markdown_table(head: Sequence[str], left: int, cells: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + ":---|" * left + "---:|" * (len(head) - left)]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]


def retrieval_markdown(rows: Sequence[dict[str, Any]], metrics: Sequence[str], versus_columns: Sequence[tuple[str, str]],
                       caption: str) -> str:
    """The retrieval table of ``compare --retrieval`` (percentages, marks against BM25, the approximate index's
    recall, latency, and a column per ``(row key, header)`` of ``versus_columns`` some row has) with its caption."""
    columns = [(key, header) for key, header in versus_columns if any(key in r for r in rows)]
    head = ["System", "Params", *map(metric_header, metrics), "Approx. recall@10 vs exact", "Latency p50 / p99 (ms)"]
    cells = []
    for r in rows:
        weight = f" (w {r['prior_weight']:.2f})" if r.get("prior_weight") is not None else ""
        row = [r["name"] + weight + (" (served default)" if r.get("served_default") else ""), format_params(r["params"])]
        row += [f"{100 * r[m]:.1f}{REFERENCE if r['reference'] else r[f'sig:{m}']}" for m in metrics]
        row.append("\u2014" if r["approx_recall@10"] is None else f"{r['approx_recall@10']:.3f}")
        row.append(f"{r['latency']['p50_ms']:.2f} / {r['latency']['p99_ms']:.2f}" if r.get("latency") else "\u2014")
        cells.append(row + [versus_text(r.get(key)) for key, _ in columns])
    return "\n".join(_markdown_table(head + [header for _, header in columns], 1, cells)) + f"\n\n{caption}\n"


def split_markdown(splits: dict[str, Any], metrics: Sequence[str], versus_columns: Sequence[tuple[str, str]],
                   caption: str) -> str:
    """Every row on each split of the judged queries (``{split: {"queries": n, "rows": [...]}}``): its metrics and its
    differences to each reference of ``versus_columns`` (``(ref)`` on the reference's own row), with the caption."""
    head = ["Split", "System", *map(metric_header, metrics), *(header for _, header in versus_columns)]
    cells = []
    for split, part in splits.items():
        for r in part["rows"]:
            row = [f"{split} ({part['queries']})", r["name"] + (" (served default)" if r.get("served_default") else "")]
            row += ["\u2014" if r[m] is None else f"{100 * r[m]:.1f}" for m in metrics]
            cells.append(row + [versus_text(r.get(key), REFERENCE.strip()) for key, _ in versus_columns])
    return "\n".join(_markdown_table(head, 2, cells)) + f"\n\n{caption}\n"


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """Every number at full precision: NDCG, p-value, bootstrap CI and mark per cutoff."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    per_k = [f"{field}@{k}" for k in KS for field in ("ndcg", "p", "ci_low", "ci_high", "sig")]
    writer.writerow(["name", "kind", "settings", "params", "reference", "run_id"] + per_k)
    for r in rows:
        values: list[Any] = []
        for k in KS:
            ci = r.get(f"ci@{k}") or (None, None)
            values += [repr(r[f"ndcg@{k}"]), _num(r.get(f"p@{k}")), _num(ci[0]), _num(ci[1]), r.get(f"sig@{k}", "")]
        writer.writerow([r["name"], r["kind"], r["settings"], r.get("params") or "", int(bool(r.get("reference"))), r.get("run_id") or ""] + values)
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def to_html(rows: Sequence[dict[str, Any]], caption: str, title: str) -> str:
    """A standalone HTML page with the table and its caption."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in table_cells(rows)
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 8px}"
        "td:nth-child(n+4){text-align:right}</style></head><body>\n"
        f"<table>\n<caption>{html.escape(title)}</caption>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n"
        f"<p>{html.escape(caption)}</p>\n</body></html>\n"
    )


def distinct_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Row names, a repeated one followed by the first item of its settings (e.g. ``n=2``)."""
    counts = Counter(r["name"] for r in rows)
    return [f"{r['name']} {r['settings'].split(',')[0]}" if counts[r["name"]] > 1 else r["name"] for r in rows]


def bar_chart(rows: Sequence[dict[str, Any]], title: str) -> bytes:
    """Grouped bars of NDCG@1/3/10 per row (PNG, matplotlib Agg, no timestamps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = distinct_names(rows)
    values = np.array([[100 * r[f"ndcg@{k}"] for k in KS] for r in rows]).reshape(len(rows), len(KS))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.5), dpi=100)
    width = 0.8 / len(KS)
    x = np.arange(len(rows))
    for i, k in enumerate(KS):
        ax.bar(x + (i - (len(KS) - 1) / 2) * width, values[:, i], width, label=f"NDCG@{k}")
    low = float(values.min()) if values.size else 0.0
    ax.set_ylim(max(0.0, np.floor(low / 5) * 5 - 5), 100)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("NDCG (%)")
    ax.set_title(title)
    ax.legend(loc="upper left", ncols=len(KS))
    fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata={"Software": None})
    plt.close(fig)
    return sink.getvalue()


def log_to_mlflow(
    settings: Settings,
    experiment: str,
    run_name: str,
    params: dict[str, str],
    rows: Sequence[dict[str, Any]],
    files: dict[str, bytes],
    tags: dict[str, str],
) -> str:
    """One MLflow run holding the params, NDCG/timing metrics per row and the report files; returns its id."""
    import tempfile

    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from encoders.model.tracking import experiment_id

    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    run_tags = {str(k): str(v) for k, v in tags.items()}
    run_id = client.create_run(experiment_id(settings, experiment), tags=run_tags, run_name=run_name).info.run_id
    now = int(time.time() * 1000)
    metrics = []
    for r in rows:
        slug = re.sub(r"[^A-Za-z0-9_.\-]", "_", r["key"])
        values = {f"ndcg_at_{k}/{slug}": r[f"ndcg@{k}"] for k in KS}
        values.update({f"fit_seconds/{slug}": r["fit_seconds"], f"score_seconds/{slug}": r["score_seconds"]})
        metrics += [Metric(key, float(v), now, 0) for key, v in values.items()]
    try:
        client.log_batch(run_id, metrics=metrics, params=[Param(k, v) for k, v in params.items()])
        with tempfile.TemporaryDirectory(prefix="deepsent-report-") as tmp:
            for name, data in files.items():
                (Path(tmp) / name).write_bytes(data)
            client.log_artifacts(run_id, tmp, artifact_path="report")
    except Exception:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def _per_query_table(judged: JudgedSet, results: Sequence[tuple[str, NdcgResult]]) -> bytes:
    columns: dict[str, Any] = {"query": judged.queries}
    for key, result in results:
        for k in KS:
            columns[f"{key}@{k}"] = result.per_query[k]
    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink, compression="zstd")
    return sink.getvalue()


def report_files(judged: JudgedSet, results: Sequence[tuple[str, NdcgResult]], rows: list[dict[str, Any]],
                 caption: str) -> dict[str, bytes]:
    """The report's files: the table as md/csv/html, the NDCG chart, per-query NDCG and timings."""
    title = f"Table IV on {judged.name}"
    timings = {r["key"]: {"fit_seconds": r["fit_seconds"], "score_seconds": r["score_seconds"], "cached": r["cached"]} for r in rows}
    return {
        "table.md": to_markdown(rows, caption).encode("utf-8"),
        "table.csv": to_csv(rows).encode("utf-8"),
        "table.html": to_html(rows, caption, title).encode("utf-8"),
        "ndcg.png": bar_chart(rows, title),
        "per_query.parquet": _per_query_table(judged, results),
        "timings.json": (json.dumps(timings, indent=2, sort_keys=True) + "\n").encode("utf-8"),
    }
