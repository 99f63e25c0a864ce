"""Training pairs: clicked (query, title) pairs with click counts, split train/valid by query.

Reads every ingested ``clicks/dt=*/`` partition, aggregates per (normalised query, doc_id):
``clicks`` (clicked rows) and ``impressions`` (rows shown), keeps the pairs clicked at least
once, and assigns each *query* to ``valid`` when a seeded hash of it falls below
``valid_fraction`` (stable: a query keeps its split as the log grows). Writes
``pairs/train.parquet`` and ``pairs/valid.parquet`` (PAIRS_SCHEMA, sorted by query and doc_id)
with Store.replace_dataset, so a re-run gives the same bytes. Every clicked row of the input
lands in exactly one pair: the sum of ``clicks`` equals the clicked rows read (checked).
The titles shown and not clicked go, split the same way, to ``skipped/{train,valid}.parquet``
(SKIPPED_SCHEMA, see :mod:`pipeline.features.skipped`): the log's own negatives for ``featurize
--negative-source skipped|mixed``.
"""
from __future__ import annotations

import hashlib
import logging
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.config import Settings
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.features.skipped import SKIPPED_ROOT, combine_skipped, skipped_in_partition
from pipeline.ingest.assemble import verified_clicks_files
from pipeline.ingest.paths import CLICKS_ROOT
from pipeline.storage.schemas import PAIRS_SCHEMA, SKIPPED_SCHEMA
from pipeline.storage.store import Store
from pipeline.storage.locations import folder

PAIRS_ROOT = folder("pairs")
_KEYS = ["query", "doc_id"]
log = logging.getLogger(__name__)


def build_pairs(settings: Settings, valid_fraction: float = 0.1, seed: int = SEED) -> dict[str, Any]:
    """Aggregate all ingested clicks into train/valid pair files; counts and URIs."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ConfigError(f"valid fraction must be in [0, 1), got {valid_fraction}")
    store = Store.from_settings(settings)
    partials, skipped_partials, rows_read, clicked_rows = [], [], 0, 0
    columns = ["impression_id", "query", "doc_id", "title", "position", "clicked"]
    for table in (store.read_table(path, columns=columns) for path in verified_clicks_files(store)):
        rows_read += table.num_rows
        clicked_rows += int(pc.sum(table.column("clicked").cast(pa.int64())).as_py() or 0)
        partials.append(_aggregate_clicks(table))
        skipped_partials.append(skipped_in_partition(table))
    if not partials:
        raise DeepsentError(f"{store.uri(CLICKS_ROOT)}: no ingested clicks; run `deepsent ingest` first")
    pairs = _combine(partials)
    if int(pc.sum(pairs.column("clicks")).as_py() or 0) != clicked_rows:
        raise DeepsentError("pairs: clicks of the pairs do not add up to the clicked rows (a bug, please report)")
    pairs = pairs.filter(pc.greater(pairs.column("clicks"), 0))
    pairs = _with_split(pairs, valid_fraction, seed, PAIRS_SCHEMA)
    parts = {name: pairs.filter(pc.equal(pairs.column("split"), name)) for name in ("train", "valid")}
    written = store.replace_dataset(PAIRS_ROOT, [(f"{name}.parquet", table) for name, table in parts.items()])
    skipped = _with_split(combine_skipped(skipped_partials, pairs), valid_fraction, seed, SKIPPED_SCHEMA)
    skipped_parts = {name: skipped.filter(pc.equal(skipped["split"], name)) for name in parts}
    store.replace_dataset(SKIPPED_ROOT, [(f"{name}.parquet", table) for name, table in skipped_parts.items()])
    counts = {
        "rows_read": rows_read,
        "clicked_rows": clicked_rows,
        "pairs": pairs.num_rows,
        **{f"{name}_pairs": table.num_rows for name, table in parts.items()},
        **{f"{name}_queries": len(set(table.column("query").to_pylist())) for name, table in parts.items()},
        **{f"{name}_skipped_rows": table.num_rows for name, table in skipped_parts.items()},
    }
    log.info("pairs: %s", counts)
    outputs = {**dict(zip(parts, written)), **{f"skipped_{n}": store.uri(f"{SKIPPED_ROOT}/{n}.parquet") for n in parts}}
    return {**counts, "valid_fraction": valid_fraction, "seed": seed, "outputs": outputs}


def query_split(queries: Iterable[str], valid_fraction: float, seed: int) -> list[str]:
    """``"valid"`` or ``"train"`` per query, from a seeded hash (same query, same split)."""
    out = []
    for query in queries:
        digest = hashlib.blake2b(f"{seed}\x1f{query}".encode("utf-8"), digest_size=8).digest()
        out.append("valid" if int.from_bytes(digest, "big") / 2.0**64 < valid_fraction else "train")
    return out


def _with_split(table: pa.Table, valid_fraction: float, seed: int, schema: pa.Schema) -> pa.Table:
    """``table`` with its ``split`` column (by query) in ``schema``'s column order."""
    split = query_split(table.column("query").to_pylist(), valid_fraction, seed)
    return table.append_column("split", pa.array(split, pa.string())).select(schema.names).cast(schema)


def _aggregate_clicks(table: pa.Table) -> pa.Table:
    """One partition's click rows per (query, doc_id): clicks, impressions, a title."""
    grouped = table.group_by(_KEYS, use_threads=False).aggregate(
        [("clicked", "sum"), ("clicked", "count"), ("title", "min")]
    )
    return _pairs_table(grouped, "clicked_sum", "clicked_count")


def _combine(partials: list[pa.Table]) -> pa.Table:
    """Per-partition aggregates summed into one table sorted by (query, doc_id)."""
    grouped = pa.concat_tables(partials).group_by(_KEYS, use_threads=False).aggregate(
        [("clicks", "sum"), ("impressions", "sum"), ("title", "min")]
    )
    table = _pairs_table(grouped, "clicks_sum", "impressions_sum")
    return table.sort_by([("query", "ascending"), ("doc_id", "ascending")])


def _pairs_table(grouped: pa.Table, clicks: str, impressions: str) -> pa.Table:
    return pa.table(
        {
            "query": grouped.column("query"),
            "doc_id": grouped.column("doc_id"),
            "title": grouped.column("title_min"),
            "clicks": grouped.column(clicks).cast(pa.int64()),
            "impressions": grouped.column(impressions).cast(pa.int64()),
        }
    )
