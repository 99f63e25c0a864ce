"""The HTML report of section V-A for one trained model: pictures, keyword tables, topics, costs.

:func:`analyze` loads a logged LSTM/BiLSTM/RNN model (``encoders.model.loading.load_encoder``),
traces example (query, title) pairs (default: real dev-set queries with their best- and
worst-graded title), counts keywords (and the same for a comparison model, e.g. the RNN, side
by side), allocates keywords to cells over a set of dev queries, plots the training costs from
MLflow, and writes one self-contained ``index.html`` (images as data URIs, so it renders from the
store, a download or the MLflow artifact viewer alike) with ``analysis.json`` and the PNGs beside
it under ``reports/analysis/<run-id>/``; the same files are logged to the model's MLflow run
under ``analysis/``. No timestamps are written: re-running gives the same bytes.
"""
from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from encoders.analysis.plots import cost_curves, gate_heatmaps
from encoders.analysis.report_html import ReportData, TextView, build_report
from encoders.analysis.traces import (
    DEFAULT_THRESHOLD,
    KEYWORD_SHARE,
    TopicAllocation,
    activation_trace,
    activation_traces,
    detect_keywords,
    keyword_table,
    topic_allocation,
    topic_summary,
)
from encoders.model.loading import load_encoder
from encoders.model.text_encoder import TextEncoder
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from pipeline.storage.locations import working

log = logging.getLogger(__name__)

REPORT_ROOT = working("reports/analysis")
ARTIFACT_DIR = "analysis"
DEFAULT_EXAMPLES, DEFAULT_TOPIC_QUERIES, DEFAULT_SEED = 3, 40, 7


@dataclass(frozen=True)
class Example:
    """A query and the titles to show with it, each with a note (e.g. its dev-set grade)."""

    query: str
    titles: tuple[tuple[str, str], ...]


# ---- inputs ---------------------------------------------------------------------------------------
def _dev_groups(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in read_judgments(settings.dev_judgments).to_pylist():
        groups.setdefault(row["query"], []).append(row)
    return groups


def default_examples(settings: Settings, count: int = DEFAULT_EXAMPLES, seed: int = DEFAULT_SEED) -> list[Example]:
    """``count`` dev queries (2+ words, seeded pick) with their best- and worst-graded title (ties: lowest id)."""
    groups = _dev_groups(settings)
    multi = sorted(q for q in groups if len(q.split()) >= 2 and len({r["label"] for r in groups[q]}) > 1)
    extreme = [q for q in multi if {0, 3} <= {r["label"] for r in groups[q]}]
    pool = extreme if len(extreme) >= count else multi
    picks = np.random.default_rng(seed).choice(len(pool), size=min(count, len(pool)), replace=False)
    out = []
    for k in sorted(int(p) for p in picks):
        rows = groups[pool[k]]
        best = min(rows, key=lambda r: (-r["relevance"], r["doc_id"]))
        worst = min(rows, key=lambda r: (r["relevance"], r["doc_id"]))
        note = "{} title (grade {label}, mean rating {relevance:.2f}, product {doc_id})"
        out.append(Example(pool[k], ((best["title"], note.format("relevant", **best)),
                                     (worst["title"], note.format("irrelevant", **worst)))))
    return out


def default_topic_queries(settings: Settings, count: int = DEFAULT_TOPIC_QUERIES, seed: int = DEFAULT_SEED) -> list[str]:
    """``count`` distinct dev queries of 2+ words (seeded pick, file order kept)."""
    queries = sorted(q for q in _dev_groups(settings) if len(q.split()) >= 2)
    picks = np.random.default_rng(seed + 1).choice(len(queries), size=min(count, len(queries)), replace=False)
    return [queries[int(k)] for k in sorted(picks)]


def cosine_scores(encoder: TextEncoder, query: str, titles: Sequence[str]) -> list[float]:
    """R(Q, D) of eq. (3) for the query and each title."""
    q = torch.from_numpy(encoder.encode([query], "query"))
    d = torch.from_numpy(encoder.encode(list(titles), "doc"))
    return [float(s) for s in F.cosine_similarity(q, d, dim=-1)]


# ---- the job ------------------------------------------------------------------------------------
def _view(models: list[TextEncoder], side: str, text: str, note: str, name: str, images: dict[str, bytes],
          threshold: float) -> TextView:
    """Trace ``text`` through every model; picture of the first, keyword tables of all."""
    traces = [activation_trace(m.model, m.vocab, text, side, m.max_words) for m in models]
    images[name] = gate_heatmaps(traces[0], detect_keywords(traces[0].forward["y"], 10, threshold))
    tables = [(m.label, keyword_table(t, threshold=threshold)) for m, t in zip(models, traces)]
    return TextView(side, text, note, name, tables)


def analyze(settings: Settings, model_uri: str, examples: Sequence[Example] | None = None,
            compare_uri: str | None = None, topic_queries: Sequence[str] | None = None,
            threshold: float = DEFAULT_THRESHOLD, example_count: int = DEFAULT_EXAMPLES) -> dict[str, Any]:
    """Write the section V-A report of ``model_uri`` to the store and its MLflow run; returns URIs and tables.

    Without ``examples``, ``example_count`` dev-set queries are shown with their best and worst title.
    """
    if threshold <= 0:
        raise ConfigError(f"threshold must be > 0, got {threshold}")
    main = load_encoder(model_uri, settings, device="cpu")
    models = [main] + ([load_encoder(compare_uri, settings, device="cpu")] if compare_uri else [])
    if len(models) == 2 and models[1].label == main.label:
        models[1].label += f" [run {models[1].run_id[:8]}]"  # told apart from a model of the same name
    source = "given by the caller" if examples else "dev-set queries (judgments_dev.csv), best- and worst-graded title"
    examples = list(examples) if examples else default_examples(settings, example_count)
    if not examples or any(not e.titles for e in examples):
        raise ConfigError("every example needs a query and at least one title")
    images: dict[str, bytes] = {}
    sections = []
    for n, ex in enumerate(examples, start=1):
        views = [_view(models, "query", ex.query, "query", f"example{n}-query.png", images, threshold)]
        scores = [cosine_scores(m, ex.query, [t for t, _ in ex.titles]) for m in models]
        for k, (title, note) in enumerate(ex.titles):
            view = _view(models, "doc", title, note, f"example{n}-title{k + 1}.png", images, threshold)
            view.scores = {m.label: s[k] for m, s in zip(models, scores)}
            views.append(view)
        sections.append(views)
    queries = list(topic_queries) if topic_queries else default_topic_queries(settings)
    topics = topic_allocation(activation_traces(main.model, main.vocab, queries, "query", main.max_words),
                              threshold=threshold)
    images["cost_curves.png"] = cost_curves([m.run_id for m in models], settings)
    notes = [
        "Heatmaps: cells (rows, 1-based) x words; the four gate panels and the last panel share one colour scale; "
        "dots mark the words each of the 10 most active cells detects.",
        f"A cell detects a word when its y moves there by more than {threshold:g} x the cell's range of y over the "
        f"sentence (zero start included); the first word read is never counted ('-', paper footnote 3).",
        "Right to left: " + "; ".join(f"{label}: {table.backward_source}" for label, table in sections[0][0].tables) + ".",
        f"Keyword: more than {KEYWORD_SHARE:.0%} of the 10 most active cells detect it in every counted direction "
        "(bold counts pass the bar).",
        "Topics: words detected left to right by the 5 most active cells of each query's final y.",
    ]
    facts = [("model", f"{main.label}, {main.model_uri}, run {main.run_id}")]
    facts += [("compared with", f"{m.label}, {m.model_uri}, run {m.run_id}") for m in models[1:]]
    facts += [("examples", source), ("topic queries", f"{len(queries)} {'given' if topic_queries else 'dev-set'}")]
    report = ReportData(f"deepsent analysis: {main.label}", facts, sections, topics, topic_summary(topics),
                        images, "cost_curves.png", notes)
    result = _write(settings, main, report, _tables_json(sections, topics, report.topic_text, threshold))
    return {**result, "summary": _summary(main, models, sections, topics, result)}


def _tables_json(sections: list[list[TextView]], topics: TopicAllocation, topic_text: str, threshold: float) -> dict[str, Any]:
    examples = [{"texts": [{"side": v.side, "text": v.text, "note": v.note, "scores": v.scores,
                            "keyword_tables": {label: t.to_dict() for label, t in v.tables}} for v in views]}
                for views in sections]
    return {"threshold": threshold, "keyword_share": KEYWORD_SHARE, "examples": examples,
            "topics": topics.to_dict(), "topic_summary": topic_text}


def _write(settings: Settings, main: TextEncoder, report: ReportData, tables: dict[str, Any]) -> dict[str, Any]:
    """index.html, analysis.json and the PNGs into the store and the run's MLflow artifacts."""
    from mlflow import MlflowClient

    store = Store.from_settings(settings)
    prefix = f"{REPORT_ROOT}/{main.run_id}"
    page = build_report(report)
    files = {"index.html": page.encode("utf-8"), "analysis.json": json.dumps(tables, indent=1, sort_keys=True).encode("utf-8"),
             **{f"figures/{name}": png for name, png in report.images.items()}}
    written = [store.write_bytes(f"{prefix}/{name}", data) for name, data in sorted(files.items())]
    keep = {store.relpath(w) for w in written}
    for stale in store.list_files(prefix):
        if stale not in keep:
            store.delete(stale)
    scratch = store.scratch_dir()
    try:
        for name, data in files.items():
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            (scratch / name).write_bytes(data)
        client = MlflowClient(settings.mlflow_tracking_uri)
        client.log_artifacts(main.run_id, str(scratch), ARTIFACT_DIR)
        artifact_uri = f"{client.get_run(main.run_id).info.artifact_uri}/{ARTIFACT_DIR}/index.html"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"run_id": main.run_id, "model_uri": main.model_uri, "model": main.label, "files": sorted(files),
            "report_uri": store.uri(f"{prefix}/index.html"), "artifact_uri": artifact_uri, **tables}


def _summary(main: TextEncoder, models: list[TextEncoder], sections: list[list[TextView]], topics: TopicAllocation,
             result: dict[str, Any]) -> str:
    lines = [f"analysis of {main.label} (run {main.run_id})"
             + (f" vs {', '.join(m.label for m in models[1:])}" if len(models) > 1 else "")
             + f": {len(sections)} example(s), {len(topics.queries)} topic queries",
             f"  report: {result['report_uri']}", f"  MLflow artifact: {result['artifact_uri']}"]
    for views in sections:
        for view in views:
            table = view.tables[0][1]
            keywords = [w for w, k in zip(table.words, table.keywords) if k]
            scores = f" R={view.scores[main.label]:.3f}" if view.scores else ""
            lines.append(f"  {view.note} \"{view.text}\"{scores}: keywords {', '.join(keywords) or '(none)'}")
    return "\n".join(lines)
