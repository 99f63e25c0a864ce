"""Feature shards on Dask: one partition of pairs -> negatives + hashed sentences -> Parquet bytes.

A split's partitions are the fewest equal-size shards (±1 row) of at most ``shard_rows`` rows; they
depend on the rows, ``shard_rows`` and the seed, never on the number of workers, so the output bytes
are the same on 1 worker, 2 workers or a remote cluster. Each partition draws its negatives with
:func:`pipeline.features.negatives.draw_negatives` from a generator seeded by (seed, split, partition).
"""
from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import ConfigError
from pipeline.features.negatives import RANDOM, TitlePool, draw_negatives, partition_rng
from pipeline.features.skipped import SkipIndex
from pipeline.features.trigram import Encoder, TrigramVocab, encode_vectorised
from pipeline.storage.schemas import FEATURES_SCHEMA
from pipeline.storage.store import PARQUET_OPTIONS

#: Dictionary-encode only the text columns: trying it on millions of trigram ids costs time and bytes.
SHARD_PARQUET_OPTIONS = {**PARQUET_OPTIONS, "use_dictionary": ["query", "doc_id", "title", "neg_doc_ids"]}


@dataclass(frozen=True)
class ShardContext:
    """What every partition task needs (broadcast once to the workers)."""

    vocab: TrigramVocab
    pools: dict[str, TitlePool]
    negatives: int
    max_words: int
    seed: int
    negative_source: str = RANDOM
    skips: dict[str, SkipIndex] = field(default_factory=dict)


@dataclass(frozen=True)
class ShardJob:
    """One partition of one split: its rows (pair_id, query, doc_id, title)."""

    split: str
    index: int
    rows: pa.Table


@dataclass
class ShardResult:
    """A featurised partition: the Parquet bytes and its counts."""

    split: str
    index: int
    data: bytes
    stats: dict[str, int] = field(default_factory=dict)



def plan_shards(split: str, pairs: pa.Table, seed: int, shard_rows: int) -> list[ShardJob]:
    """Shuffle a split's rows with the seed and cut them into the fewest equal shards of at most ``shard_rows`` rows.

    Equal sizes (they differ by at most one row) keep the workers evenly loaded: 22,148 rows are
    6 shards of 3,691-3,692 rows, not 5 of 4,096 and one of 1,668.
    """
    if shard_rows < 1:
        raise ConfigError(f"shard_rows must be >= 1, got {shard_rows}")
    rows = pairs.select(["pair_id", "query", "doc_id", "title"])
    order = np.random.default_rng([int(seed), zlib.crc32(split.encode())]).permutation(rows.num_rows)
    parts = np.array_split(order, -(-rows.num_rows // shard_rows)) if rows.num_rows else []
    # take() copies each shard into compact buffers: a pickled slice would carry the whole table.
    return [ShardJob(split, i, rows.take(pa.array(part)).combine_chunks()) for i, part in enumerate(parts)]


def build_shard(job: ShardJob, ctx: ShardContext, encoder: Encoder = encode_vectorised) -> tuple[pa.Table, dict[str, int]]:
    """Draw the negatives of a partition, hash every sentence and assemble the FEATURES_SCHEMA table."""
    n, rows = ctx.negatives, job.rows.num_rows
    drawn = draw_negatives(job.rows, n, ctx.negative_source, ctx.pools[job.split], ctx.skips.get(job.split),
                           partition_rng(ctx.seed, job.split, job.index))
    queries = job.rows["query"].combine_chunks()
    texts = pa.concat_arrays([job.rows["title"].combine_chunks(), drawn.titles])
    # per pair: the clicked title (row r of texts), then its n negatives (rows + r * n + j)
    order = np.column_stack([np.arange(rows), rows + np.arange(rows * n).reshape(rows, n)]).ravel()
    encoded = encoder(ctx.vocab, pa.concat_arrays([queries, texts.take(pa.array(order))]), ctx.max_words)
    per_pair = pa.array(np.arange(0, rows * (n + 1) + 1, n + 1, dtype=np.int32))
    neg_offsets = pa.array(np.arange(0, rows * n + 1, n, dtype=np.int32)) if n else pa.array(np.zeros(rows + 1, np.int32))
    table = pa.table(
        {
            "pair_id": job.rows["pair_id"],
            "query": queries,
            "doc_id": job.rows["doc_id"],
            "title": job.rows["title"],
            "neg_doc_ids": pa.ListArray.from_arrays(neg_offsets, drawn.doc_ids),
            "q_ids": encoded.ids.slice(0, rows),
            "q_counts": encoded.counts.slice(0, rows),
            "d_ids": pa.ListArray.from_arrays(per_pair, encoded.ids.slice(rows)),
            "d_counts": pa.ListArray.from_arrays(per_pair, encoded.counts.slice(rows)),
        }
    ).cast(FEATURES_SCHEMA)
    words_in = encoded.words_in
    stats = {
        "rows": rows,
        "query_words": int(np.minimum(words_in[:rows], ctx.max_words).sum()),
        "doc_words": int(np.minimum(words_in[rows:], ctx.max_words).sum()),
        "queries_truncated": int((words_in[:rows] > ctx.max_words).sum()),
        "docs_truncated": int((words_in[rows:] > ctx.max_words).sum()),
        "words_dropped": int(np.maximum(words_in - ctx.max_words, 0).sum()),
        **drawn.stats,
    }
    return table, stats


def run_shard_job(job: ShardJob, ctx: ShardContext, encoder: Encoder = encode_vectorised) -> ShardResult:
    """Featurise one partition into Parquet bytes (runs on a Dask worker)."""
    table, stats = build_shard(job, ctx, encoder)
    sink = io.BytesIO()
    pq.write_table(table, sink, **SHARD_PARQUET_OPTIONS)
    data = sink.getvalue()
    stats["bytes"] = len(data)
    return ShardResult(job.split, job.index, data, stats)


def run_shards(client: Any, jobs: Sequence[ShardJob], ctx: ShardContext, encoder: Encoder = encode_vectorised) -> Iterator[ShardResult]:
    """Run the partitions on the cluster; results arrive as they finish (flat driver memory)."""
    from dask.distributed import as_completed

    if not jobs:
        return
    shared = client.scatter(ctx, broadcast=True, hash=False)
    # each shard's rows go straight to one worker (round robin) instead of through the scheduler inside the task
    # graph (Dask warns above 10 MB, a log of ~90k pairs); each is freed when its task is done
    futures = client.map(run_shard_job, client.scatter(list(jobs), hash=False), ctx=shared, encoder=encoder, pure=False)
    for future, result in as_completed(futures, loop=client.loop, with_results=True):  # results fetched in the background
        yield result
        future.release()

