"""Declared schemas of the datasets that stages hand to each other (the data contract).

Store layout (relative to the store root; see DESIGN.md):

    landing/clicks/dt=YYYY-MM-DD/*.jsonl|csv|tsv|parquet|xml   raw logs (LANDING_FIELDS per row)
    clicks/dt=YYYY-MM-DD/part-0.parquet                       CLICKS_SCHEMA, one row per shown result
    landing/catalog/dt=YYYY-MM-DD/*.csv|tsv|jsonl|parquet       catalogue files (CATALOG_LANDING_COLUMNS, optional op)
    catalog/dt=YYYY-MM-DD/part-0.parquet                      CATALOG_SCHEMA, the whole catalogue as of the date
    catalog/changes/dt=YYYY-MM-DD/part-0.parquet              CATALOG_CHANGES_SCHEMA, the date's launches, edits, retirements
    quarantine/<stage>/dt=YYYY-MM-DD/part-0.parquet            QUARANTINE_SCHEMA
    pairs/{train,valid}.parquet                                PAIRS_SCHEMA
    skipped/{train,valid}.parquet                              SKIPPED_SCHEMA
    mined/<bm25|ann>/{train,valid}.parquet                     SKIPPED_SCHEMA (+ manifest.json)
    features/<version>/{train,valid}/part-NNNNN.parquet        FEATURES_SCHEMA
    features/<version>/vocab.json, manifest.json
    vectors/<key>/part-<digest>.parquet, .json                 one encoder part's vectors (encoders.model.vector_parts)
    indexes/<model_type>/<version>/current.json               the build served: {"build": "<id>"}
    indexes/<model_type>/<version>/builds/<id>/                index.faiss, ids.parquet (doc_id, title), bm25/, manifest.json
    search/<name>.parquet                                      SEARCH_RESULTS_SCHEMA
    reports/<run>/                                             tables and plots

Outside the layout, in the folder its ``--out`` names: ``deepsent embed``'s export, ``titles.parquet`` and
``queries.parquet`` (export_schema) and ``manifest.json``.
"""
from __future__ import annotations

import pyarrow as pa

#: Fields of one landing-zone row (one shown result of one search impression), as search
#: engines write them. ``clicked`` is 0/1 or a boolean; ``ts`` ISO-8601 with timezone.
LANDING_FIELDS: dict[str, type] = {
    "ts": str,
    "user_id": str,
    "session_id": str,
    "impression_id": str,
    "query": str,
    "doc_id": str,
    "title": str,
    "position": int,
    "clicked": bool,
}

CLICKS_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),  # stable hash of the source event (dedupe key)
        ("ts", pa.timestamp("ms", tz="UTC")),
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("impression_id", pa.string()),
        ("query_raw", pa.string()),
        ("query", pa.string()),  # normalised (pipeline.text.textnorm.normalize)
        ("doc_id", pa.string()),
        ("title_raw", pa.string()),
        ("title", pa.string()),  # normalised
        ("position", pa.int32()),  # 1-based rank shown
        ("clicked", pa.bool_()),
        ("source_file", pa.string()),  # landing file, relative to the store root
        ("source_line", pa.int64()),  # 1-based line/row in that file
    ]
)

#: Columns every catalogue landing file has (a CSV/TSV header, a Parquet file; JSONL keys): ``product_id`` and
#: ``title``, with an optional ``op`` (CATALOG_OPS; empty or absent = ``upsert``; a ``retire`` row needs no title).
#: Any other column is kept as an attribute of the product (pipeline.ingest.catalog).
CATALOG_LANDING_COLUMNS = ("product_id", "title")
CATALOG_OPS = ("upsert", "retire")

#: The whole catalogue as of a date, one row per live product, sorted by ``product_id``.
CATALOG_SCHEMA = pa.schema(
    [
        ("product_id", pa.string()),
        ("title_raw", pa.string()),
        ("title", pa.string()),  # normalised as click titles (pipeline.text.textnorm.normalize)
        ("attributes", pa.string()),  # the file's other columns: a JSON object, keys sorted ("{}" when none)
        ("since", pa.date32()),  # the launch date
        ("updated", pa.date32()),  # the date of the last edit (the launch date when never edited)
    ]
)

#: One date's changes to the catalogue, sorted by ``product_id``; titles normalised.
CATALOG_CHANGES_SCHEMA = pa.schema(
    [
        ("product_id", pa.string()),
        ("change", pa.string()),  # "launch", "edit" (the raw title or an attribute changed) or "retire"
        ("old_title", pa.string()),  # null for a launch
        ("new_title", pa.string()),  # null for a retirement
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        ("stage", pa.string()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),  # 1-based; 0 when the whole file is rejected
        ("reason", pa.string()),
        ("raw", pa.string()),  # the offending row, truncated to 4 KiB
    ]
)

PAIRS_SCHEMA = pa.schema(
    [
        ("query", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("clicks", pa.int64()),
        ("impressions", pa.int64()),
        ("split", pa.string()),  # "train" or "valid", assigned per query
    ]
)

#: Titles shown for a query and never clicked for it (pipeline.features.skipped): tier 1 = above or directly
#: below the click of ``clicked_doc_id`` in one impression; tier 2 = shown for the query ("" clicked_doc_id).
SKIPPED_SCHEMA = pa.schema(
    [
        ("query", pa.string()),
        ("clicked_doc_id", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("tier", pa.int8()),
        ("shown", pa.int64()),  # rows of the log behind this entry
        ("split", pa.string()),
    ]
)

#: A sentence as stored in feature shards: one list per word of trigram ids, and the
#: matching counts (a trigram that occurs twice in a word has count 2).
SENTENCE_IDS = pa.list_(pa.list_(pa.int32()))
SENTENCE_COUNTS = pa.list_(pa.list_(pa.int16()))

FEATURES_SCHEMA = pa.schema(
    [
        ("pair_id", pa.int64()),
        ("query", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("neg_doc_ids", pa.list_(pa.string())),
        ("q_ids", SENTENCE_IDS),
        ("q_counts", SENTENCE_COUNTS),
        ("d_ids", pa.list_(SENTENCE_IDS)),  # [clicked title, negative 1, ..., negative n]
        ("d_counts", pa.list_(SENTENCE_COUNTS)),
    ]
)

#: Columns of ``deepsent embed``'s exported vectors (``titles.parquet``, ``queries.parquet``), before the vector.
EXPORT_SCHEMA_FIELDS = [
    ("id", pa.string()),  # product id for titles; a stable hash of the text for queries
    ("text", pa.string()),  # the normalised text the vector is of
]


def export_schema(dim: int) -> pa.Schema:
    """Schema of an exported vectors file with fixed-size float32 vectors of ``dim``."""
    return pa.schema(EXPORT_SCHEMA_FIELDS + [("vector", pa.list_(pa.float32(), dim))])


#: Batch search results (``deepsent search --queries``): the top-k titles of each query, best first.
SEARCH_RESULTS_SCHEMA = pa.schema([("query", pa.string()), ("rank", pa.int32()), ("doc_id", pa.string()),
                                   ("title", pa.string()), ("score", pa.float32()), ("found_by", pa.string())])
