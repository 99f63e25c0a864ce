"""One date's file results -> its three outputs: clicks, quarantine and manifest (written last).

Whatever path read the files (:mod:`pipeline.ingest.reference_path` or :mod:`pipeline.ingest.arrow_path`),
the date is put together here, in file order then line order: rejected records go to the
quarantine, a row whose ``event_id`` was already seen earlier in the date is a duplicate
(retried log writes), and every row of a bot user is removed (:mod:`pipeline.ingest.bots`). When the store has a
catalogue for the date (ingested first), a row naming a product not live in it (unknown, not yet launched, retired)
is quarantined first, reason ``unknown_product``. The counts always satisfy
``rows_read = accepted + quarantined + duplicates + bot_rows``.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import DeepsentError
from pipeline.ingest.bot_columns import find_bots_columns
from pipeline.ingest.bots import BOT_RULE
from pipeline.ingest.catalog.days import live_product_ids
from pipeline.ingest.paths import CLICKS_ROOT, STAGE, clicks_path, manifest_path, partition
from pipeline.ingest.reference_path import FileResult
from pipeline.storage import artifacts
from pipeline.storage.artifacts import ArtifactError, file_facts
from pipeline.storage.quarantine import Quarantine, quarantine_prefix
from pipeline.storage.schemas import CLICKS_SCHEMA
from pipeline.storage.store import Store

COUNT_KEYS = ("rows_read", "accepted", "quarantined", "duplicates", "bot_rows")
log = logging.getLogger(__name__)


def assemble_partition(store: Store, day: dt.date, results: Sequence[FileResult]) -> dict[str, Any]:
    """De-duplicate and de-bot the date's rows, write clicks, quarantine and manifest; the manifest."""
    rows = pa.concat_tables([r.rows for r in results]).combine_chunks() if results else CLICKS_SCHEMA.empty_table()
    rows, unknown = split_unknown_products(rows, live_product_ids(store, day), day)
    quarantine = Quarantine(STAGE)
    order = {r.path: index for index, r in enumerate(results)}
    rejected = [(r.path, line, reason, raw) for r in results for line, reason, raw in r.rejected] + unknown
    for path, line, reason, raw in sorted(rejected, key=lambda q: (order[q[0]], q[1])):
        quarantine.add(path, line, reason, raw)
    unique = rows.filter(first_occurrences(rows.column("event_id")))
    bots = find_bots_columns(unique.column("user_id"), unique.column("impression_id"),
                             unique.column("ts").cast(pa.int64()).to_numpy())
    table = unique
    if bots:
        bot_ids = pa.array(sorted(b.user_id for b in bots))
        table = unique.filter(pc.invert(pc.is_in(unique.column("user_id"), value_set=bot_ids)))
    counts = {
        "rows_read": sum(r.rows_read for r in results),
        "accepted": table.num_rows,
        "quarantined": len(quarantine),
        "duplicates": rows.num_rows - unique.num_rows,
        "bot_rows": unique.num_rows - table.num_rows,
    }
    _check_identity(day, counts)
    manifest = {
        "date": day.isoformat(),
        **counts,
        "files": {r.path: r.rows_read for r in results},
        "quarantine_reasons": quarantine.reasons(),
        "bot_rule": BOT_RULE,
        "bot_users": [b.as_dict() for b in bots],
        "outputs": {"clicks": clicks_path(day), "quarantine": f"{quarantine_prefix(STAGE, partition(day))}/part-0.parquet"},
    }
    written = store.replace_dataset(f"{CLICKS_ROOT}/{partition(day)}", [("part-0.parquet", table.combine_chunks())])
    manifest["clicks_files"] = file_facts(store, f"{CLICKS_ROOT}/{partition(day)}", written)
    quarantine.write(store, partition(day))
    store.write_json(manifest_path(day), manifest)
    log.info("ingest %s: %s", day.isoformat(), ", ".join(f"{k}={counts[k]}" for k in COUNT_KEYS))
    return manifest


def split_unknown_products(rows: pa.Table, live: frozenset[str] | None,
                           day: dt.date) -> tuple[pa.Table, list[tuple[str, int, str, str]]]:
    """``rows`` without those naming a product not live in ``day``'s catalogue (``live``; None: no catalogue, all
    kept), and those rows as quarantine entries ``(file, line, reason, raw)``, raw = the row's landing fields as JSON."""
    if live is None or rows.num_rows == 0:
        return rows, []
    known = pc.is_in(rows.column("doc_id"), value_set=pa.array(sorted(live), pa.string()))
    out = []
    for row in rows.filter(pc.invert(known)).to_pylist():
        fields = {"ts": row["ts"].isoformat(), **{k: row[k] for k in ("user_id", "session_id", "impression_id")},
                  "query": row["query_raw"], "doc_id": row["doc_id"], "title": row["title_raw"],
                  "position": row["position"], "clicked": row["clicked"]}
        reason = f"unknown_product: doc_id {row['doc_id']!r} is not live in the catalogue of {day.isoformat()}"
        out.append((row["source_file"], row["source_line"], reason, json.dumps(fields, ensure_ascii=False)))
    return rows.filter(known), out


def first_occurrences(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A mask that keeps the first row of each distinct value (order kept)."""
    if len(values) == 0:
        return pa.array([], pa.bool_())
    codes = pc.dictionary_encode(pa.chunked_array([values]).combine_chunks() if isinstance(values, pa.Array)
                                 else values.combine_chunks()).indices.to_numpy()
    _, first = np.unique(codes, return_index=True)
    keep = np.zeros(len(values), dtype=bool)
    keep[first] = True
    return pa.array(keep)


def _check_identity(day: dt.date, counts: dict[str, int]) -> None:
    if counts["rows_read"] != sum(counts[k] for k in COUNT_KEYS[1:]):
        raise DeepsentError(f"ingest {day}: count identity broken {counts} (a bug, please report)")


def verified_clicks_files(store: Store) -> list[str]:
    """Every ingested clicks file, each checked against its day's manifest (written last by ``ingest``): a file
    without one (an interrupted ingest), missing, truncated or replaced is one line naming it and the rebuild."""
    files = store.list_files(CLICKS_ROOT, ".parquet")
    for folder in sorted({posixpath.dirname(f) for f in files}):
        name = posixpath.basename(folder)
        rebuild = f"deepsent ingest --date {name.removeprefix('dt=')}"
        path = f"{CLICKS_ROOT}/_manifests/{name}.json"
        if not store.exists(path):
            raise ArtifactError(store.uri(folder), "clicks without their ingest manifest (an interrupted ingest)", rebuild)
        recorded = artifacts.read_manifest(store, path, rebuild).get("clicks_files")
        if recorded is None:  # ingested before checksums were recorded
            continue
        artifacts.verify_files(store, folder, recorded, rebuild)
        extra = sorted(set(f for f in files if posixpath.dirname(f) == folder) - {f"{folder}/{n}" for n in recorded})
        if extra:
            raise ArtifactError(store.uri(extra[0]), "a clicks file the ingest did not write", rebuild)
    return files
