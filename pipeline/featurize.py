"""Feature shards: clicked pairs -> trigram-id sequences of the query, the title and n negatives.

``featurize`` reads ``pairs/{train,valid}.parquet``, quarantines unusable rows, builds the
trigram vocabulary on Dask over the training text, and featurises partitions on Dask (negative
sampling + word hashing + Parquet encoding on the workers; the driver only writes the returned
bytes). A split's partitions are the fewest equal-size shards (±1 row) of at most ``shard_rows``
rows; they depend on the rows, ``shard_rows`` and the seed, never on the number of workers, so the
output bytes are the same on 1 worker, 2 workers or a remote cluster. Negatives of a split come
from that split's own titles (validation pairs never see a training title as a negative).
Layout: ``features/<version>/{train,valid}/part-NNNNN.parquet``, ``vocab.json``,
``manifest.json`` and ``features/LATEST``; ``<version>`` hashes the format, pairs, settings and
seed.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import Settings
from pipeline.defaults import NEGATIVES, SEED
from pipeline.errors import ConfigError, InputError
from pipeline.negatives import TitlePool, partition_rng
from pipeline.quarantine import Quarantine
from pipeline.results import FeatureSet
from pipeline.schemas import FEATURES_SCHEMA
from pipeline.store import PARQUET_OPTIONS, Store
from pipeline.textnorm import normalize
from pipeline.trigram import Encoder, TrigramVocab, encode_vectorised, word_counts

log = logging.getLogger(__name__)

#: /2: a split is cut into ceil(rows / shard_rows) shards of equal size (±1 row); /1 cut full blocks of shard_rows
FEATURES_FORMAT = "deepsent-features/2"
SPLITS = ("train", "valid")
DEFAULT_SHARD_ROWS = 4096
LATEST = "features/LATEST"
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


@dataclass
class CheckedPairs:
    """A pairs file after validation: usable rows (with ``pair_id`` = 0-based row) and quarantined ones."""

    relpath: str
    sha256: str
    rows_in: int
    clean: pa.Table
    rows_quarantined: int


def check_pairs(store: Store, relpath: str, split: str, quarantine: Quarantine) -> CheckedPairs:
    """Read one pairs file; rows with empty or non-normalised text or a wrong split are quarantined."""
    uri = store.uri(relpath)
    if not store.exists(relpath):
        raise InputError(uri, "no pairs found; run `deepsent pairs` first")
    data = store.read_bytes(relpath)
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(uri, f"not a readable Parquet file: {exc}") from None
    missing = [c for c in ("query", "doc_id", "title") if c not in table.column_names]
    if missing:
        raise InputError(uri, f"missing column(s) {missing}; expected pipeline.schemas.PAIRS_SCHEMA")
    n = table.num_rows
    reason = np.full(n, "", dtype=object)
    for column in ("doc_id", "query", "title"):
        values = table[column].cast(pa.string()).combine_chunks()
        empty = pc.fill_null(pc.equal(pc.utf8_length(values), 0), True).to_numpy(zero_copy_only=False)
        unnormalised = [t for t in pc.unique(values).drop_null().to_pylist() if normalize(t) != t]
        odd = pc.is_in(values, value_set=pa.array(unnormalised, pa.string())).to_numpy(zero_copy_only=False)
        reason = np.where((reason == "") & empty, f"empty {column}", reason)
        if column != "doc_id":
            reason = np.where((reason == "") & odd, f"{column} is not normalised text", reason)
    if "split" in table.column_names:
        wrong = pc.fill_null(pc.not_equal(table["split"], split), True).to_numpy(zero_copy_only=False)
        reason = np.where((reason == "") & wrong, f"split is not {split!r}", reason)
    bad = np.flatnonzero(reason != "")
    for i in bad:
        raw = json.dumps(table.slice(int(i), 1).to_pylist()[0], default=str, ensure_ascii=False)
        quarantine.add(relpath, int(i) + 1, str(reason[i]), raw)
    clean = table.select(["query", "doc_id", "title"]).append_column("pair_id", pa.array(np.arange(n, dtype=np.int64)))
    clean = clean.filter(pa.array(reason == "")).cast(
        pa.schema([("query", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("pair_id", pa.int64())])
    )
    return CheckedPairs(relpath, hashlib.sha256(data).hexdigest(), n, clean, int(bad.size))


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
    pool, n, rows = ctx.pools[job.split], ctx.negatives, job.rows.num_rows
    negatives = pool.sample(job.rows["query"], n, partition_rng(ctx.seed, job.split, job.index))
    docs = np.concatenate([pool.title_codes(job.rows["title"])[:, None], negatives], axis=1).ravel()
    queries = job.rows["query"].combine_chunks()
    encoded = encoder(ctx.vocab, pa.concat_arrays([queries, pool.titles.take(pa.array(docs))]), ctx.max_words)
    per_pair = pa.array(np.arange(0, rows * (n + 1) + 1, n + 1, dtype=np.int32))
    neg_offsets = pa.array(np.arange(0, rows * n + 1, n, dtype=np.int32)) if n else pa.array(np.zeros(rows + 1, np.int32))
    table = pa.table(
        {
            "pair_id": job.rows["pair_id"],
            "query": queries,
            "doc_id": job.rows["doc_id"],
            "title": job.rows["title"],
            "neg_doc_ids": pa.ListArray.from_arrays(neg_offsets, pool.doc_ids.take(pa.array(negatives.ravel()))),
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


def _version(fingerprints: dict[str, str], params: dict[str, int]) -> str:
    payload = json.dumps({"format": FEATURES_FORMAT, "pairs": fingerprints, "params": params}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def latest_version(store: Store) -> str:
    """The version written last by ``featurize`` (``features/LATEST``)."""
    if not store.exists(LATEST):
        raise InputError(store.uri(LATEST), "no feature shards yet; run `deepsent featurize` first")
    return store.read_text(LATEST).strip()


def read_manifest(store: Store, version: str | None = None) -> dict[str, Any]:
    """The manifest of feature ``version`` (default: the latest)."""
    version = version or latest_version(store)
    return store.read_json(f"features/{version}/manifest.json")


def _texts(pairs: pa.Table) -> pa.Array:
    """Distinct queries and titles of a pairs table."""
    return pa.concat_arrays([pc.unique(pairs["query"]), pc.unique(pairs["title"])])


def dev_oov(settings: Settings, vocab: TrigramVocab) -> dict[str, Any] | None:
    """OOV statistics of the vocabulary on the distinct queries and titles of judgments_dev.csv."""
    from pipeline.homedepot import read_judgments

    if not settings.dev_judgments.exists():
        log.warning("%s not found: no OOV share on dev", settings.dev_judgments)
        return None
    dev = read_judgments(settings.dev_judgments)
    return {"file": settings.dev_judgments.name, **vocab.oov_stats(_texts(dev))}


def split_report(checked: CheckedPairs, shards: list[dict[str, int]], pool_size: int) -> dict[str, Any]:
    """Counts of one split for the manifest: rows in = rows out + rows quarantined."""
    total = {k: sum(int(s[k]) for s in shards) for k in ("rows", "bytes", "query_words", "doc_words",
                                                         "queries_truncated", "docs_truncated", "words_dropped")}
    return {
        "rows_in": checked.rows_in,
        "rows_out": total["rows"],
        "rows_quarantined": checked.rows_quarantined,
        "title_pool": pool_size,
        "bytes": total["bytes"],
        "words": {"query": total["query_words"], "doc": total["doc_words"]},
        "truncated": {"query_sentences": total["queries_truncated"], "doc_sentences": total["docs_truncated"],
                      "words_dropped": total["words_dropped"]},
        "shards": [{"path": s["path"], "rows": s["rows"], "bytes": s["bytes"]} for s in shards],
    }


def _remove_stale(store: Store, prefix: str, keep: set[str]) -> None:
    """Delete files under ``prefix`` that this run did not write (a re-run leaves no leftovers)."""
    for stale in store.list_files(prefix):
        if stale not in keep:
            store.delete(stale)


def featurize(
    settings: Settings,
    negatives: int = NEGATIVES,
    min_count: int = 1,
    max_words: int = 30,
    seed: int = SEED,
    shard_rows: int = DEFAULT_SHARD_ROWS,
) -> FeatureSet:
    """Build the vocabulary and the train/valid feature shards; returns version, counts and URIs."""
    from pipeline.dask_cluster import dask_client

    if negatives < 0 or min_count < 1 or max_words < 1:
        raise ConfigError(f"need negatives >= 0, min_count >= 1, max_words >= 1 (got {negatives}, {min_count}, {max_words})")
    store = Store.from_settings(settings)
    quarantine = Quarantine("featurize")
    checked = {split: check_pairs(store, f"pairs/{split}.parquet", split, quarantine) for split in SPLITS}
    params = {"negatives": negatives, "min_count": min_count, "max_words": max_words, "seed": seed, "shard_rows": shard_rows}
    fingerprints = {split: c.sha256 for split, c in checked.items()}
    version = _version(fingerprints, params)
    root = f"features/{version}"
    if checked["train"].clean.num_rows == 0:
        quarantine.write(store, version)
        raise InputError(store.uri(checked["train"].relpath), "no usable training pair (see the quarantine)")
    jobs = {s: plan_shards(s, checked[s].clean, seed, shard_rows) for s in SPLITS}
    all_clean = pa.concat_tables([checked[s].clean for s in SPLITS])
    pools = {s: TitlePool.build(checked[s].clean, all_clean) for s in SPLITS}
    for s in SPLITS:
        _check_pool(pools[s], checked[s], negatives, store.uri(checked[s].relpath))
    shards: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    with dask_client(settings) as client:
        train_text = [pa.concat_arrays([j.rows["query"].combine_chunks(), j.rows["title"].combine_chunks()]) for j in jobs["train"]]
        train_words = word_counts(train_text, client)
        vocab = TrigramVocab.from_word_counts(train_words, min_count)
        log.info("vocabulary %s: %d ids (min_count %d)", vocab.version, vocab.size, min_count)
        ctx = ShardContext(vocab, pools, negatives, max_words, seed)
        for result in run_shards(client, jobs["train"] + jobs["valid"], ctx):
            relpath = f"{root}/{result.split}/part-{result.index:05d}.parquet"
            store.write_bytes(relpath, result.data)
            shards[result.split].append({"index": result.index, "path": relpath, **result.stats})
    for s in SPLITS:
        shards[s].sort(key=lambda shard: shard["index"])
        _remove_stale(store, f"{root}/{s}", {shard["path"] for shard in shards[s]})
    quarantine_path = store.relpath(quarantine.write(store, version))
    vocab.save(store, f"{root}/vocab.json")
    manifest = {
        "format": FEATURES_FORMAT,
        "version": version,
        "params": params,
        "negatives": negatives,
        "seed": seed,
        "source": {s: {"path": checked[s].relpath, "sha256": checked[s].sha256} for s in SPLITS},
        "pairs_fingerprint": hashlib.sha256("".join(fingerprints[s] for s in SPLITS).encode()).hexdigest()[:16],
        "vocab": {"path": f"{root}/vocab.json", "version": vocab.version, "size": vocab.size, "min_count": min_count},
        "oov": {"dev": dev_oov(settings, vocab), "valid": vocab.oov_stats(_texts(checked["valid"].clean))},
        "splits": {s: split_report(checked[s], shards[s], pools[s].size) for s in SPLITS},
        "quarantine": {"path": quarantine_path, "rows": len(quarantine), "reasons": quarantine.reasons()},
    }
    store.write_json(f"{root}/manifest.json", manifest)
    store.write_text(LATEST, version + "\n")
    for s in SPLITS:
        cut = manifest["splits"][s]["truncated"]
        log.info("%s: max_words %d cut %d queries and %d titles (%d words dropped)", s, max_words,
                 cut["query_sentences"], cut["doc_sentences"], cut["words_dropped"])
    return feature_set(store, manifest)


def _check_pool(pool: TitlePool, checked: CheckedPairs, negatives: int, source: str) -> None:
    """Fail early, naming the row, when a query leaves fewer than ``negatives`` titles to draw from."""
    short = pool.short_rows(checked.clean["query"], negatives)
    if short.size:
        row = int(checked.clean["pair_id"][int(short[0])].as_py()) + 1
        raise InputError(source, f"cannot draw {negatives} negatives: the {checked.relpath} title pool has "
                         f"{pool.size} titles and too many are clicked for this query", row=row)


def feature_set(store: Store, manifest: dict[str, Any]) -> FeatureSet:
    """The :class:`FeatureSet` a features manifest describes: version, counts per split and URIs."""
    splits = manifest["splits"]
    return FeatureSet(
        version=manifest["version"],
        counts={s: {k: v for k, v in splits[s].items() if k != "shards"} for s in SPLITS},
        vocab_size=manifest["vocab"]["size"],
        vocab_version=manifest["vocab"]["version"],
        oov_share_dev=(manifest["oov"]["dev"] or {}).get("oov_share"),
        uris={
            "manifest": store.uri(f"features/{manifest['version']}/manifest.json"),
            "vocab": store.uri(manifest["vocab"]["path"]),
            "quarantine": store.uri(manifest["quarantine"]["path"]),
            **{s: [store.uri(shard["path"]) for shard in splits[s]["shards"]] for s in SPLITS},
        },
    )
