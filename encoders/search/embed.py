"""``deepsent embed``: every corpus title's and judged query's vector, exported to a folder.

The run's corpus is :func:`pipeline.ingest.catalog.corpus.corpus_titles`' (its one reader, beside the catalogue).
:func:`embed` gets the vector of every corpus title and every query of the given judged sets through the vector
store (:class:`~encoders.model.vector_store.StoredEncoder`, as the encode stage and the index get them): a text an
earlier stage encoded is read from ``vectors/<key>/``, a new one is encoded once and stored there for every later
reader. It writes them to the folder the user named (``--out``; the store's layout holds no copy):
``titles.parquet`` and ``queries.parquet`` (id, text, vector: :func:`pipeline.storage.schemas.export_schema`) and
``manifest.json`` (the model, the counts, each file's size and SHA-256), built in a temporary folder beside it and
renamed into place, so no reader sees half an export. On a terminal a progress bar per kind (titles, queries)
counts the texts done on stderr, as training's does; the texts exported per second go to the model's MLflow run.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from encoders.model.device import configure, describe
from encoders.model.loading import load_encoder
from encoders.model.tracking import log_metrics_to_run
from encoders.model.vector_store import StoredEncoder
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.core.results import StageResult
from pipeline.ingest.catalog.corpus import corpus_titles
from pipeline.storage.artifacts import file_facts
from pipeline.storage.schemas import export_schema
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments

log = logging.getLogger(__name__)

#: Texts per call to the vector store: the progress bar moves, and each call's new vectors are one stored part.
CHUNK_ROWS = 8192
#: What an export's manifest says wrote it: a folder holding another manifest is never replaced.
WRITTEN_BY = "deepsent embed"
KINDS = (("title", "titles", "doc"), ("query", "queries", "query"))


@dataclass(frozen=True)
class EmbedResult(StageResult):
    """The vectors of the corpus titles and judged queries of one model, exported to a folder."""

    out: str
    manifest: str
    titles: int
    queries: int
    encoded: dict[str, int]  # distinct texts encoded now (and stored in vectors/), by kind
    from_store: dict[str, int]  # distinct texts whose vectors an earlier encode had stored, by kind
    seconds: float
    titles_per_s: float
    queries_per_s: float
    run_id: str
    model: str
    summary: str = ""


def query_id(query: str) -> str:
    """A stable id of a normalised query text."""
    return "q" + hashlib.sha1(query.encode("utf-8")).hexdigest()[:16]


def judged_queries(paths: list[Path]) -> list[str]:
    """Distinct normalised queries of the judged sets, in first-seen order."""
    seen: dict[str, None] = {}
    for path in paths:
        for query in read_judgments(path)["query"].to_pylist():
            seen.setdefault(query, None)
    return list(seen)


def out_folder(out: Path) -> Path:
    """``out`` as an absolute folder an export may be written to: new, empty, or an earlier export (replaced);
    one line for a file there, another folder's contents, or a parent that cannot be made."""
    out = Path(out).expanduser().absolute()
    if out.is_file() or (out.exists() and not out.is_dir()):
        raise ConfigError(f"--out {out}: a file is there; name a folder for the export")
    if out.is_dir() and any(out.iterdir()) and _written_by(out / "manifest.json") != WRITTEN_BY:
        raise ConfigError(f"--out {out}: a folder that is not a deepsent embed export is there; name a new or "
                          "empty folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot make its folder {out.parent} ({exc.strerror or exc})") from None
    return out


def _written_by(manifest: Path) -> str | None:
    """The ``written_by`` of an export's manifest; None for no manifest or one that is not ours."""
    try:
        found = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found.get("written_by") if isinstance(found, dict) else None


def stored_vectors(encoder: StoredEncoder, kind: str, texts: list[str], side: str,
                   timing: dict[str, float]) -> np.ndarray:
    """Vectors of ``texts`` through the vector store, :data:`CHUNK_ROWS` at a time, with a progress bar on a
    terminal (``kind``: what the bar counts); the seconds spent add to ``timing[kind]``."""
    from tqdm import tqdm

    bar = tqdm(total=len(texts), desc=f"embed {'queries' if kind == 'query' else 'titles'}", unit=kind,
               file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)
    chunks = []
    began = time.perf_counter()
    for start in range(0, len(texts), CHUNK_ROWS):
        chunks.append(encoder.encode(texts[start : start + CHUNK_ROWS], side))
        bar.update(len(chunks[-1]))
    bar.close()
    timing[kind] = timing.get(kind, 0.0) + time.perf_counter() - began
    return np.concatenate(chunks) if chunks else np.empty((0, encoder.dim), dtype=np.float32)


def export_table(rows: list[tuple[str, str]], vectors: np.ndarray, dim: int) -> pa.Table:
    """(id, text, vector) rows of the export schema from (id, text) rows and their vectors."""
    flat = pa.array(vectors.reshape(-1), pa.float32())
    return pa.table([pa.array([i for i, _ in rows], pa.string()), pa.array([t for _, t in rows], pa.string()),
                     pa.FixedSizeListArray.from_arrays(flat, dim)], schema=export_schema(dim))


def _publish(building: Path, out: Path) -> None:
    """The finished ``building`` folder renamed to ``out``; an earlier export there is moved aside, then removed."""
    aside = None
    if out.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, aside / out.name)
    os.replace(building, out)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def embed(settings: Settings, model_uri: str, out: Path, judgments: list[Path] | None = None,
          threads: int = 2) -> EmbedResult:
    """Export the vector of every corpus title and judged query of ``model_uri`` (read from the vector store, the
    missing ones encoded and stored there first) to the folder ``out``: two Parquet files and a manifest."""
    began = time.perf_counter()
    out = out_folder(out)
    store = Store.from_settings(settings)
    encoder = StoredEncoder(load_encoder(model_uri, settings), store)
    configure(encoder.device, threads)
    judgments = judgments or [settings.dev_judgments]
    titles, title_sources = corpus_titles(settings, store)
    rows = {"title": titles, "query": [(query_id(q), q) for q in judged_queries(judgments)]}
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        folder = Store(str(building))
        timing: dict[str, float] = {}
        encoded, from_store, written = {}, {}, []
        for kind, name, side in KINDS:
            texts = [text for _, text in rows[kind]]
            distinct, missing = len(set(texts)), len(encoder.missing(texts, side))
            vectors = stored_vectors(encoder, kind, texts, side, timing)
            encoded[name], from_store[name] = missing, distinct - missing
            written.append(folder.write_table(f"{name}.parquet", export_table(rows[kind], vectors, encoder.dim)))
        rates = {kind: len(rows[kind]) / timing[kind] if timing.get(kind) else 0.0 for kind in rows}
        manifest = {
            "written_by": WRITTEN_BY, "model_uri": model_uri, "run_id": encoder.run_id, "model": encoder.label,
            "model_type": encoder.model_type, "dim": encoder.dim, "device": describe(encoder.device),
            "vocab_version": encoder.vocab.version, "max_words": encoder.max_words,
            "titles": {"rows": len(titles), "sources": title_sources, "encoded": encoded["titles"],
                       "from_store": from_store["titles"]},
            "queries": {"rows": len(rows["query"]), "judgments": [str(p) for p in judgments],
                        "encoded": encoded["queries"], "from_store": from_store["queries"]},
            "files": file_facts(folder, "", written),
        }
        folder.write_json("manifest.json", manifest)
        _publish(building, out)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    log_metrics_to_run(settings, encoder.run_id, {"embed_titles_per_s": rates["title"],
                                                  "embed_queries_per_s": rates["query"]})
    seconds = time.perf_counter() - began
    summary = (f"exported {len(titles):,} titles and {len(rows['query']):,} queries of {encoder.label} (run "
               f"{encoder.run_id}) on {describe(encoder.device)}: {encoded['titles']:,} titles and "
               f"{encoded['queries']:,} queries encoded now (stored in {store.uri('vectors')}), the rest read from "
               f"it; {rates['title']:,.0f} titles/s -> {out}")
    return EmbedResult(out=str(out), manifest=str(out / "manifest.json"), titles=len(titles), queries=len(rows["query"]),
                       encoded=encoded, from_store=from_store, seconds=round(seconds, 2), titles_per_s=rates["title"],
                       queries_per_s=rates["query"], run_id=encoder.run_id, model=encoder.label, summary=summary)
