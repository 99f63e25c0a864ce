"""Feature shards: clicked pairs -> trigram-id sequences of the query, the title and n negatives.

``featurize`` reads ``pairs/{train,valid}.parquet``, quarantines unusable rows, builds the
trigram vocabulary on Dask over the training text, and featurises partitions on Dask (negative
sampling + word hashing + Parquet encoding on the workers; the driver only writes the returned
bytes). A split's partitions are the fewest equal-size shards (±1 row) of at most ``shard_rows``
rows; they depend on the rows, ``shard_rows`` and the seed, never on the number of workers, so the
output bytes are the same on 1 worker, 2 workers or a remote cluster (the shard code is in
:mod:`pipeline.features.shards`). Negatives of a split come from that split's own titles (validation pairs
never see a training title as a negative); ``negative_source`` picks random titles (default),
the titles the log skipped for the query, half of each, or half mined by BM25 or the champion's index
(:mod:`pipeline.features.negatives`; mined by ``encoders.search.mining`` before this runs).
Layout: ``features/<version>/{train,valid}/part-NNNNN.parquet``, ``vocab.json``,
``manifest.json`` and ``features/LATEST``, then the held-out clicks drawn once for every consumer
(``click_lists/``, :mod:`pipeline.features.click_lists`); ``<version>`` hashes the format, pairs, settings and
seed, and for a source other than ``random`` the source and the skipped files (so random versions
are those of earlier releases, and no two sources share a version).
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.config import Settings
from pipeline.core.defaults import NEGATIVES, SEED
from pipeline.core.errors import ConfigError, InputError
from pipeline.core.results import FeatureSet
from pipeline.features.negatives import DRAW_STATS, RANDOM, TitlePool, check_negative_source, skipped_quota
from pipeline.features.pair_check import CheckedPairs, check_pairs
from pipeline.features.shards import ShardContext, ShardJob, build_shard, plan_shards, run_shards  # noqa: F401  (re-exported)
from pipeline.features.skipped import SkipIndex
from pipeline.features.text_arrays import word_counts
from pipeline.features.trigram import TrigramVocab
from pipeline.features.feature_files import LATEST, SPLITS, VOCAB_FILE, check_skipped, feature_root
from pipeline.features.click_lists import write_click_lists, write_held_out_clicks
from pipeline.storage import artifacts
from pipeline.storage.quarantine import Quarantine
from pipeline.storage.store import Store

log = logging.getLogger(__name__)

#: /2: a split is cut into ceil(rows / shard_rows) shards of equal size (±1 row); /1 cut full blocks of shard_rows
FEATURES_FORMAT = "deepsent-features/2"
DEFAULT_SHARD_ROWS = 4096
#: A vocabulary smaller than this (e.g. from a huge --min-count) is refused, never made LATEST.
MIN_VOCAB = 100


def _version(fingerprints: dict[str, str], params: dict[str, int]) -> str:
    payload = json.dumps({"format": FEATURES_FORMAT, "pairs": fingerprints, "params": params}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _texts(pairs: pa.Table) -> pa.Array:
    """Distinct queries and titles of a pairs table."""
    return pa.concat_arrays([pc.unique(pairs["query"]), pc.unique(pairs["title"])])


def dev_oov(settings: Settings, vocab: TrigramVocab) -> dict[str, Any] | None:
    """OOV statistics of the vocabulary on the distinct queries and titles of judgments_dev.csv."""
    from pipeline.text.homedepot import read_judgments

    if not settings.dev_judgments.exists():
        log.warning("%s not found: no OOV share on dev", settings.dev_judgments)
        return None
    dev = read_judgments(settings.dev_judgments)
    return {"file": settings.dev_judgments.name, **vocab.oov_stats(_texts(dev))}


def split_report(checked: CheckedPairs, shards: list[dict[str, Any]], pool_size: int) -> dict[str, Any]:
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
        "negatives": {k: sum(int(s.get(k, 0)) for s in shards) for k in DRAW_STATS},
        "shards": [{"path": s["path"], "rows": s["rows"], "bytes": s["bytes"], "sha256": s["sha256"]} for s in shards],
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
    negative_source: str = RANDOM,
) -> FeatureSet:
    """Build the vocabulary and the train/valid feature shards; returns version, counts and URIs."""
    from pipeline.runtime.dask_cluster import dask_client

    if negatives < 0 or min_count < 1 or max_words < 1:
        raise ConfigError(f"need negatives >= 0, min_count >= 1, max_words >= 1 (got {negatives}, {min_count}, {max_words})")
    check_negative_source(negative_source, negatives)
    store = Store.from_settings(settings)
    quarantine = Quarantine("featurize")
    checked = {split: check_pairs(store, f"pairs/{split}.parquet", split, quarantine) for split in SPLITS}
    params: dict[str, Any] = {"negatives": negatives, "min_count": min_count, "max_words": max_words, "seed": seed,
                              "shard_rows": shard_rows}
    fingerprints = {split: c.sha256 for split, c in checked.items()}
    skipped = {}
    if negative_source != RANDOM:  # random keeps the versions (and the params) of earlier releases
        params["negative_source"] = negative_source
        skipped = check_skipped(store, checked, quarantine, negative_source)
        fingerprints.update({f"skipped_{s}": skipped[s].sha256 for s in SPLITS})
    version = _version(fingerprints, params)
    root = feature_root(version)
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
        if vocab.size < MIN_VOCAB:
            raise ConfigError(f"--min-count {min_count} leaves a vocabulary of {vocab.size} letter-trigram id(s) "
                              f"(fewer than {MIN_VOCAB}): nothing a model could learn from; nothing was written")
        skips = {s: SkipIndex.build(skipped[s].clean) for s in skipped}
        ctx = ShardContext(vocab, pools, negatives, max_words, seed, negative_source, skips)
        for result in run_shards(client, jobs["train"] + jobs["valid"], ctx):
            relpath = f"{root}/{result.split}/part-{result.index:05d}.parquet"
            store.write_bytes(relpath, result.data)
            shards[result.split].append({"index": result.index, "path": relpath,
                                         "sha256": hashlib.sha256(result.data).hexdigest(), **result.stats})
    for s in SPLITS:
        shards[s].sort(key=lambda shard: shard["index"])
        _remove_stale(store, f"{root}/{s}", {shard["path"] for shard in shards[s]})
    quarantine_path = store.relpath(quarantine.write(store, version))
    vocab.save(store, f"{root}/{VOCAB_FILE}")
    manifest = {
        "format": FEATURES_FORMAT,
        "version": version,
        "params": params,
        "negatives": negatives,
        "seed": seed,
        "negative_source": {"name": negative_source, "skipped_per_pair": skipped_quota(negative_source, negatives),
                            "log": {s: _skipped_report(skipped[s]) for s in skipped}},
        "source": {s: {"path": checked[s].relpath, "sha256": checked[s].sha256} for s in SPLITS},
        "pairs_fingerprint": hashlib.sha256("".join(fingerprints[s] for s in SPLITS).encode()).hexdigest()[:16],
        "vocab": {"path": f"{root}/vocab.json", "version": vocab.version, "size": vocab.size, "min_count": min_count,
                  **artifacts.file_facts(store, root, [f"{root}/vocab.json"])[VOCAB_FILE]},
        "oov": {"dev": dev_oov(settings, vocab), "valid": vocab.oov_stats(_texts(checked["valid"].clean))},
        "splits": {s: split_report(checked[s], shards[s], pools[s].size) for s in SPLITS},
        "quarantine": {"path": quarantine_path, "rows": len(quarantine), "reasons": quarantine.reasons()},
    }
    store.write_json(f"{root}/manifest.json", manifest)
    write_click_lists(store, version)
    write_held_out_clicks(store, seed)
    store.write_text(LATEST, version + "\n")
    for s in SPLITS:
        cut = manifest["splits"][s]["truncated"]
        log.info("%s: max_words %d cut %d queries and %d titles (%d words dropped)", s, max_words,
                 cut["query_sentences"], cut["doc_sentences"], cut["words_dropped"])
    return feature_set(store, manifest)


def _skipped_report(skipped: CheckedPairs) -> dict[str, Any]:
    """Rows of a skipped file: in = kept + quarantined."""
    return {"path": skipped.relpath, "sha256": skipped.sha256, "rows_in": skipped.rows_in,
            "rows_kept": skipped.clean.num_rows, "rows_quarantined": skipped.rows_quarantined}


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
            "manifest": store.uri(f"{feature_root(manifest['version'])}/manifest.json"),
            "vocab": store.uri(manifest["vocab"]["path"]),
            "quarantine": store.uri(manifest["quarantine"]["path"]),
            **{s: [store.uri(shard["path"]) for shard in splits[s]["shards"]] for s in SPLITS},
        },
    )
