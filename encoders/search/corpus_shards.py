"""The corpus's title vectors encoded in shards: Dask tasks in process or on the stack, mapped tasks in a DAG.

The chain's ``encode`` stage (after ``ship``, before the gate) and the ``deepsent_index`` DAG encode every corpus
title (:func:`pipeline.ingest.catalog.corpus.corpus_titles`) through the model once, so the gate, the index and the search
stage only read vectors. A title's shard is ``crc32(title) mod shards``, the shard count
``ceil(titles / shard_titles)``: both depend on the titles alone, never on the workers, so a shard names the same
titles on one worker, on Dask or in an Airflow task. Each shard task loads the model once per worker process and
encodes those of its titles no stage encoded yet through :class:`~encoders.model.vector_store.StoredEncoder`,
which publishes them as parts of ``vectors/<key>/`` bound to their key; every consumer checks a part against its
record before reading it. A title's vector is the same bytes in whatever shard, task or worker encodes it
(:mod:`encoders.model.shape_batches`), so a worker killed in the middle of a task leaves at most a part without
its record, which the task's retry writes again, byte for byte: every title is stored once. In process
(:func:`encode_corpus`), the shards with work go, in tasks of at most
:data:`TASK_TITLES` titles (so the workers finish together) cut from a shard's titles in the order of their shape
keys (so a task's batches are full), to the settings' Dask
cluster (a local one of ``dask_workers`` processes, one thread each, or the stack's scheduler); a corpus
with less than one shard of work is encoded in the stage's own process. The local workers start as the MiniLM
runtime's rule says (:func:`encoders.towers.minilm_runtime.worker_rule`: forked or spawned, their threads).
"""
from __future__ import annotations

import logging
import math
import time
import zlib
from collections import Counter
from typing import Any

from encoders.search.results import EncodeResult
from pipeline.core.config import Settings
from pipeline.storage.store import Store

log = logging.getLogger(__name__)

#: Titles per shard: the corpus of 48,097 titles is 5 shards.
SHARD_TITLES = 10_000
#: Titles per Dask task: a shard's titles go as several tasks, so no worker idles while another ends the last shard.
TASK_TITLES = 2_000
#: Loaded models of this worker process, by (model URI, store): a worker loads each model once.
_LOADED: dict[tuple[str, str], Any] = {}


def shard_count(titles: int, shard_titles: int = SHARD_TITLES) -> int:
    """Shards of a corpus of ``titles`` titles (at least one)."""
    return max(1, math.ceil(titles / shard_titles))


def shard_of(title: str, shards: int) -> int:
    """The shard of one normalised title."""
    return zlib.crc32(title.encode("utf-8")) % shards


def corpus_texts(settings: Settings, store: Store) -> list[str]:
    """The distinct normalised corpus titles, sorted."""
    from pipeline.ingest.catalog.corpus import corpus_titles

    return sorted({title for _, title in corpus_titles(settings, store)[0]})


def _stored_encoder(settings: Settings, model_uri: str, store: Store) -> Any:
    """The model as a :class:`StoredEncoder` of ``store``, loaded once per process."""
    from encoders.model.loading import load_encoder
    from encoders.model.vector_store import StoredEncoder

    key = (model_uri, store.uri())
    if key not in _LOADED:
        _LOADED.clear()  # one model at a time: a worker serves one stage
        _LOADED[key] = load_encoder(model_uri, settings)
    return StoredEncoder(_LOADED[key], store)


def encode_texts(settings: Settings, model_uri: str, texts: list[str], threads: int | None = None) -> dict[str, int]:
    """A shard task: the ``texts`` no stage encoded yet through the model into the store; titles encoded per part
    key. ``threads``: torch's threads in this process (a local worker's share of the cores)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    encoder = _stored_encoder(settings, model_uri, Store.from_settings(settings))
    encoder.encode(texts, "doc")
    return dict(encoder.encoded)


def _summary(model_uri: str, titles: int, missing: int, shards: int, encoded: Counter, seconds: float,
             where: str) -> str:
    done = sum(encoded.values())
    return (f"encoded the corpus for {model_uri}: {titles:,} titles, {missing:,} without stored vectors, "
            f"{done:,} title vectors encoded ({', '.join(f'{k[:8]} {v:,}' for k, v in sorted(encoded.items())) or 'none'})"
            f" in {shards} shard(s), {where}, {seconds:.1f}s")


def encode_shard(settings: Settings, model_uri: str, shard: int, shards: int) -> EncodeResult:
    """One shard of the corpus encoded in this process (one mapped task of a DAG)."""
    began = time.perf_counter()
    store = Store.from_settings(settings)
    mine = [t for t in corpus_texts(settings, store) if shard_of(t, shards) == shard]
    encoder = _stored_encoder(settings, model_uri, store)
    missing = len(encoder.missing(mine, "doc"))
    encoder.encode(mine, "doc")
    seconds, where = time.perf_counter() - began, f"shard {shard} of {shards} in this task"
    return EncodeResult(model_uri, len(mine), missing, shards, dict(encoder.encoded), round(seconds, 2), where,
                        _summary(model_uri, len(mine), missing, 1, encoder.encoded, seconds, where))


def _by_shape(encoder: Any, texts: list[str]) -> list[str]:
    """``texts`` ordered by their shape keys (:mod:`encoders.model.shape_batches`), the part with the fewest rows to a
    pass (a transformer) first, so a task cut from them fills its batches (tasks of 2,000 titles in title order held
    nearly every key, each key's last MiniLM batch of 16 rows part filler: 27% more rows than titles on a corpus of
    47,000; in this order 1%)."""
    from encoders.model.shape_batches import ROWS

    parts = sorted(encoder.parts("doc"), key=lambda part: ROWS[part.inputs])
    keys = list(zip(*(encoder.shape_keys(part.module, part.inputs, texts) for part in parts)))
    return [texts[i] for i in sorted(range(len(texts)), key=keys.__getitem__)]


def _gathered(futures: list[Any], sizes: list[int], began: float) -> Counter:
    """The tasks' counts, with a progress line per task (titles done, titles/s, time left)."""
    total, done, counts = sum(sizes), 0, Counter()
    for finished, (future, size) in enumerate(zip(futures, sizes), 1):
        counts.update(future.result())
        done += size
        rate = done / max(time.perf_counter() - began, 1e-9)
        log.info("encode: task %d of %d done, %s/%s titles, %.0f titles/s, about %.0f s left", finished, len(futures),
                 f"{done:,}", f"{total:,}", rate, (total - done) / max(rate, 1e-9))
    return counts


def encode_corpus(settings: Settings, model_uri: str, shard_titles: int = SHARD_TITLES) -> EncodeResult:
    """Every corpus title's vector stored for ``model_uri``: the shards with titles to encode run as Dask tasks
    (in process: less than one shard of work)."""
    from encoders.towers.minilm_runtime import worker_rule
    from pipeline.runtime.dask_cluster import dask_client

    began = time.perf_counter()
    store = Store.from_settings(settings)
    texts = corpus_texts(settings, store)
    shards = shard_count(len(texts), shard_titles)
    encoder = _stored_encoder(settings, model_uri, store)
    missing = encoder.missing(texts, "doc")
    encoded: Counter = Counter()
    if len(missing) < shard_titles:
        where = "in process"
        encoder.encode(missing, "doc")
        encoded.update(encoder.encoded)
    else:
        missing = _by_shape(encoder, missing)  # so a task's batches are full
        by_shard = [[t for t in missing if shard_of(t, shards) == s] for s in range(shards)]
        work = [part[i:i + TASK_TITLES] for part in by_shard for i in range(0, len(part), TASK_TITLES)]
        with dask_client(settings, rule=worker_rule()) as client:  # the runtime says how workers start, their threads
            workers = len(client.scheduler_info()["workers"]) or 1
            log.info("encoding %s titles (%d shards) in %d tasks on %d Dask worker(s)", f"{len(missing):,}", shards,
                     len(work), workers)
            futures = client.map(encode_texts, [settings] * len(work), [model_uri] * len(work), work, pure=False)
            encoded.update(_gathered(futures, [len(w) for w in work], began))
        where = f"on Dask ({workers} worker(s))"
    seconds = time.perf_counter() - began
    return EncodeResult(model_uri, len(texts), len(missing), shards, dict(encoded), round(seconds, 2), where,
                        _summary(model_uri, len(texts), len(missing), shards, encoded, seconds, where))
