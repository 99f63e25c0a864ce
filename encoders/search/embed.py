"""The job that embeds the whole corpus with a trained model.

``embed`` loads a logged model with ``encoders.model.loading.load_encoder`` and encodes every
title of the corpus (:func:`corpus_titles`: the latest catalogue's live products; without a catalogue, every
distinct title of the Home Depot judgment files (train + dev) and of the click pairs), and every
query of the given judged sets, in batches, streaming one Parquet part per chunk to
``embeddings/<model>-<run>/{titles,queries}/`` (memory holds one chunk of vectors, whatever the
corpus size) with a manifest, and logs the throughput to the model's MLflow run. On a terminal a
progress bar per kind (titles, queries) counts the rows embedded on stderr, as training's does.
"""
from __future__ import annotations

import hashlib
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from encoders.model.device import configure, describe
from encoders.model.loading import load_encoder
from encoders.model.text_encoder import TextEncoder
from encoders.model.tracking import log_metrics_to_run
from pipeline.core.artifacts import file_facts
from pipeline.core.config import Settings
from pipeline.core.homedepot import read_judgments
from pipeline.core.results import StageResult
from pipeline.core.schemas import embeddings_schema
from pipeline.core.store import Store
from pipeline.core.textnorm import normalize
from pipeline.ingest.catalog.days import latest_catalog

log = logging.getLogger(__name__)

EMBEDDINGS_ROOT = "embeddings"
CHUNK_ROWS = 8192


@dataclass(frozen=True)
class EmbedResult(StageResult):
    """The embeddings of the corpus titles and judged queries written by one model."""

    root: str
    manifest: str
    titles: int
    queries: int
    titles_per_s: float
    queries_per_s: float
    run_id: str
    model: str
    summary: str = ""


def query_id(query: str) -> str:
    """A stable id of a normalised query text."""
    return "q" + hashlib.sha1(query.encode("utf-8")).hexdigest()[:16]


def corpus_titles(settings: Settings, store: Store) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The run's corpus, (doc_id, normalised title) rows, and how many each source added (store files by their store path,
    so a copied store reports the same): the live products of the store's latest catalogue (doc_id = product_id, by
    id), or, for a store without a catalogue, the distinct titles of both judgment files and the click pairs."""
    catalog = latest_catalog(store)
    if catalog is not None:
        path, products = catalog
        return products, {path: len(products)}
    seen: dict[str, str] = {}
    sources: dict[str, int] = {}
    tables = [(str(p), read_judgments(p)) for p in (settings.train_judgments, settings.dev_judgments)]
    tables += [(f, t) for f, t in store.iter_tables("pairs", ["doc_id", "title"])]  # store files by their store path
    for source, table in tables:
        before = len(seen)
        for doc_id, title in zip(table["doc_id"].to_pylist(), table["title"].to_pylist()):
            seen.setdefault(doc_id, normalize(title))
        sources[source] = len(seen) - before
    return list(seen.items()), sources


def judged_queries(paths: list[Path]) -> list[str]:
    """Distinct normalised queries of the judged sets, in first-seen order."""
    seen: dict[str, None] = {}
    for path in paths:
        for query in read_judgments(path)["query"].to_pylist():
            seen.setdefault(query, None)
    return list(seen)


def _parts(encoder: TextEncoder, kind: str, rows: list[tuple[str, str]], batch_size: int | None,
           timing: dict[str, float]) -> Iterator[tuple[str, pa.Table]]:
    """One Parquet table per chunk of rows; vectors are computed chunk by chunk (flat memory)."""
    from tqdm import tqdm

    side = "doc" if kind == "title" else "query"
    bar = tqdm(total=len(rows), desc=f"embed {'queries' if kind == 'query' else 'titles'}", unit=kind,
               file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)
    for index, start in enumerate(range(0, len(rows), CHUNK_ROWS)):
        chunk = rows[start : start + CHUNK_ROWS]
        texts = [text for _, text in chunk]
        began = time.perf_counter()
        vectors = encoder.encode(texts, side, batch_size)
        timing[kind] = timing.get(kind, 0.0) + time.perf_counter() - began
        bar.update(len(chunk))
        yield f"part-{index:05d}.parquet", embeddings_table(kind, chunk, vectors)
    bar.close()


def embeddings_table(kind: str, rows: list[tuple[str, str]], vectors: np.ndarray) -> pa.Table:
    """(kind, doc_id, text, vector) rows of the embeddings schema from (id, text) rows and their vectors."""
    flat = pa.array(vectors.reshape(-1), pa.float32())
    return pa.table([pa.array([kind] * len(rows)), pa.array([d for d, _ in rows]), pa.array([t for _, t in rows]),
                     pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])], schema=embeddings_schema(vectors.shape[1]))


def embed(settings: Settings, model_uri: str, judgments: list[Path] | None = None, batch_size: int | None = None,
          threads: int = 2) -> EmbedResult:
    """Embed every corpus title and every judged query with ``model_uri``; writes Parquet + manifest (``batch_size``
    texts per forward pass; by default the shape-stable batches of :mod:`encoders.model.shape_batches`)."""
    store = Store.from_settings(settings)
    encoder = load_encoder(model_uri, settings)
    configure(encoder.device, threads)
    judgments = judgments or [settings.dev_judgments]
    titles, title_sources = corpus_titles(settings, store)
    queries = [(query_id(q), q) for q in judged_queries(judgments)]
    root = f"{EMBEDDINGS_ROOT}/{encoder.model_type}-{encoder.run_id}"
    timing: dict[str, float] = {}
    written = {
        kind: store.replace_dataset(f"{root}/{folder}", _parts(encoder, kind, rows, batch_size, timing))
        for kind, folder, rows in (("title", "titles", titles), ("query", "queries", queries))
    }
    rates = {kind: len(rows) / timing[kind] if timing.get(kind) else 0.0 for kind, rows in (("title", titles), ("query", queries))}
    manifest = {
        "model_uri": model_uri, "run_id": encoder.run_id, "model": encoder.label, "model_type": encoder.model_type,
        "config": encoder.config, "dim": encoder.dim, "param_count": encoder.param_count,
        "vocab_version": encoder.vocab.version, "max_words": encoder.max_words, "device": describe(encoder.device),
        "titles": {"rows": len(titles), "sources": title_sources, "parts": [store.relpath(w) for w in written["title"]]},
        "queries": {"rows": len(queries), "judgments": [str(p) for p in judgments],
                    "parts": [store.relpath(w) for w in written["query"]]},
        "files": file_facts(store, root, written["title"] + written["query"]),
    }
    store.write_json(f"{root}/manifest.json", manifest)
    log_metrics_to_run(settings, encoder.run_id, {"embed_titles_per_s": rates["title"], "embed_queries_per_s": rates["query"]})
    summary = (f"embedded {len(titles):,} titles and {len(queries):,} queries with {encoder.label} "
               f"(run {encoder.run_id}) on {describe(encoder.device)}: {rates['title']:,.0f} titles/s -> {store.uri(root)}")
    return EmbedResult(root=store.uri(root), manifest=store.uri(f"{root}/manifest.json"), titles=len(titles),
                       queries=len(queries), titles_per_s=rates["title"], queries_per_s=rates["query"],
                       run_id=encoder.run_id, model=encoder.label, summary=summary)
