"""Benchmark: letter-trigram hashing and pair featurisation, naive loop vs shipped path, 1 vs 2 workers.

Measures on the real training pairs (``pairs/train.parquet`` of the store when present, else
the judged pairs of judgments_train.csv with grade >= 2, see :func:`judged_pairs`), cut into
shards of at most ``--shard-rows`` rows as ``featurize`` cuts them, at each of ``--scales`` (the
pairs repeated that many times: scale 1 is the log as it is, a job of a fraction of a second;
scales 4 and 16 are logs 4 and 16 times as long, where a job lasts seconds):

* words hashed per second: every query and title -> trigram-id sequences, in ``--partitions``
  equal slices (texts and vocabulary already on the workers: this stage times the hashing
  itself; Dask spends a few ms of CPU per task, so slices of a few ms each would time Dask);
* pairs featurised per second: one whole ``featurize`` job over the shards (context
  broadcast, negatives, hashing, Parquet bytes back to the driver).

Each for (a) the straightforward per-word Python loop (at ``--naive-scales`` only: it takes
minutes beyond) and (b) the shipped vectorised encoder, on a LocalCluster of 1 and of 2
workers: ``--repeat`` rounds, each starting a fresh cluster of 1 worker then one of 2 (only one
cluster up at a time), so the VM's slow spells hit both alike. In a round the shipped path is
timed ``--inner`` times per stage and the median kept; the naive loop runs once, in the first
round only (cluster start-up, scattering and an untimed warm-up of both stages excluded). Two
2- vs 1-worker ratios are given for the shipped path: of the best rounds, and the median of the
per-round ratios (each round's 2-worker time against the same round's 1-worker time). On this VM
the speed of a vCPU drifts from minute to minute, so the best times can pair a fast spell with a
slow one (ratios above 2 happen); the paired median is the figure to read. Each round also
times Dask's floor, a job of as many no-op tasks as the hashing stage has slices (what any job
costs before it does work), and leaves the cluster idle for a second: the CPU, in cores, that
its own monitoring and heartbeats use whatever the job, out of the tasks' share on a busy
machine. CPU seconds of the workers' task threads, of their other (Dask) threads and of the
driver are recorded with each time, and the load average around the run: the ratio only means
something when the two cores are otherwise idle. Prints the ratios and writes
JSON (default ``bench/results/featurize.json``).

    .venv/bin/python -m bench.stages.featurize [--repeat 5] [--inner 3] [--scales 1 4 16] [--naive-scales 1 4]
        [--shard-rows 4096] [--partitions 8] [--out PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc

from bench import RESULTS, write_results
from pipeline.core.config import Settings
from pipeline.features.featurize import DEFAULT_SHARD_ROWS, ShardContext, ShardJob, plan_shards, run_shards
from pipeline.features.negatives import TitlePool
from pipeline.runtime.dask_cluster import dask_client
from pipeline.storage.schemas import PAIRS_SCHEMA, SENTENCE_COUNTS, SENTENCE_IDS
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from pipeline.features.trigram import (
    EncodedSentences,
    Encoder,
    TrigramVocab,
    encode_vectorised,
    word_counts,
    word_trigrams,
)

DEFAULT_OUT = RESULTS / "featurize.json"


def judged_pairs(settings: Settings, max_queries: int | None = None, valid_every: int = 10) -> dict[str, pa.Table]:
    """Stand-in clicked pairs: judged pairs with grade >= 2, split by a CRC32 of the query.

    Used until ``deepsent pairs`` output is at hand (tests and this benchmark). ``max_queries``
    keeps the queries with the smallest hashes (a deterministic sample).
    """
    judged = read_judgments(settings.train_judgments)
    judged = judged.filter(pc.greater_equal(judged["label"], 2))
    grouped = judged.group_by(["query", "doc_id", "title"]).aggregate([("row_id", "count")])
    queries = sorted(set(grouped["query"].to_pylist()), key=lambda q: (zlib.crc32(q.encode()), q))
    keep = set(queries[:max_queries]) if max_queries else set(queries)
    grouped = grouped.filter(pc.is_in(grouped["query"], value_set=pa.array(sorted(keep))))
    grouped = grouped.sort_by([("query", "ascending"), ("doc_id", "ascending")])
    split = ["valid" if zlib.crc32(q.encode()) % valid_every == 0 else "train" for q in grouped["query"].to_pylist()]
    table = pa.table(
        {
            "query": grouped["query"],
            "doc_id": grouped["doc_id"],
            "title": grouped["title"],
            "clicks": grouped["row_id_count"],
            "impressions": grouped["row_id_count"],
            "split": split,
        },
        schema=PAIRS_SCHEMA,
    )
    return {s: table.filter(pc.equal(table["split"], s)) for s in ("train", "valid")}


def write_judged_pairs(store: Store, settings: Settings, max_queries: int | None = None) -> dict[str, int]:
    """Write :func:`judged_pairs` to ``pairs/{train,valid}.parquet``; returns rows per split."""
    pairs = judged_pairs(settings, max_queries)
    for split, table in pairs.items():
        store.write_table(f"pairs/{split}.parquet", table)
    return {s: t.num_rows for s, t in pairs.items()}


# ---- (a) the straightforward version --------------------------------------------------------------
def naive_encode(vocab: TrigramVocab, texts: pa.Array, max_words: int | None) -> EncodedSentences:
    """Per text, per word: trigrams, a Counter, dict lookups; then Python lists -> Arrow."""
    ids, counts, words_in = [], [], []
    for text in texts.to_pylist():
        words = text.split()
        words_in.append(len(words))
        sentence_ids, sentence_counts = [], []
        for word in words[:max_words] if max_words else words:
            bag = [(vocab.index[g], c) for g, c in Counter(word_trigrams(word)).items() if g in vocab.index]
            bag = bag or [(0, 1)]
            sentence_ids.append([i for i, _ in bag])
            sentence_counts.append([c for _, c in bag])
        ids.append(sentence_ids)
        counts.append(sentence_counts)
    return EncodedSentences(pa.array(ids, SENTENCE_IDS), pa.array(counts, SENTENCE_COUNTS), np.array(words_in))


def hash_texts(texts: pa.Array, vocab: TrigramVocab, max_words: int, encoder: Encoder) -> int:
    """Hash one partition of texts to Arrow trigram-id sequences; returns the number of words hashed."""
    encoded = encoder(vocab, texts, max_words)
    return int(np.minimum(encoded.words_in, max_words).sum())


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process so far, split into Dask task threads and every other thread."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    split = {"tasks": 0.0, "other": 0.0}
    for thread in psutil.Process().threads():
        kind = "tasks" if "Dask-Default-Threads" in names.get(thread.id, "") else "other"
        split[kind] += thread.user_time + thread.system_time
    return split


def _cpu_now(client: Any) -> dict[str, float]:
    """Task-thread CPU of the workers, CPU of their other threads, and CPU of this (driver) process."""
    workers = client.run(thread_cpu).values()
    return {"workers_tasks_cpu_s": sum(w["tasks"] for w in workers), "workers_other_cpu_s": sum(w["other"] for w in workers),
            "driver_cpu_s": time.process_time()}


def _timed(fn: Callable[[], Any], client: Any) -> tuple[float, Any, dict[str, float]]:
    """Wall time of one call, its result and the CPU seconds spent on it: task threads, Dask's other threads, driver."""
    before = _cpu_now(client)
    start = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - start
    after = _cpu_now(client)
    return wall, out, {key: round(after[key] - before[key], 3) for key in before}


def scaled_shards(train: pa.Table, scale: int, shard_rows: int) -> list[ShardJob]:
    """The training pairs repeated ``scale`` times (fresh pair ids), cut into shards as ``featurize`` cuts them."""
    table = pa.concat_tables([train] * scale)
    table = table.append_column("pair_id", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    return plan_shards("train", table, 7, shard_rows)


def hash_partitions(jobs: list[ShardJob], partitions: int) -> list[pa.Array]:
    """Every query and title of the shards, in ``partitions`` equal slices (compact copies, cheap to ship)."""
    texts = pa.concat_arrays([j.rows[c].combine_chunks() for j in jobs for c in ("query", "title")])
    step = -(-len(texts) // partitions)
    return [pa.concat_arrays([texts.slice(i, step)]) for i in range(0, len(texts), step)]


def _time_round(settings: Settings, workers: int, jobs: list[ShardJob], texts: list[pa.Array], ctx: ShardContext,
                methods: Sequence[str], inner: int) -> dict[tuple[str, str], tuple[float, Any, dict[str, float]]]:
    """Timings of each stage and method on a fresh cluster of ``workers`` (the only cluster up).

    The shipped path is timed ``inner`` times and gives its median sample (the naive loop once), as
    does the Dask floor: a job of as many no-op tasks as the hashing stage has slices. The idle
    cluster is timed once.
    """
    encoders = {"naive": naive_encode, "shipped": encode_vectorised}
    out = {}
    with dask_client(settings.with_overrides(dask_workers=workers, dask_address="")) as client:
        # the hashing stage times the hashing itself: texts and vocabulary are on the workers before the clock starts,
        # on every worker, so that a task runs on whichever worker is free (a slow core does not hold back the job)
        scattered = client.scatter(texts, hash=False, broadcast=True)
        vocab = client.scatter(ctx.vocab, broadcast=True, hash=False)
        # warm-up, untimed: first Arrow calls and first-touch allocations of the hashing, on every worker
        featurise_run(client, jobs[:workers], ctx, encode_vectorised)
        hash_run(client, scattered, vocab, ctx.max_words, encode_vectorised)
        floor_run(client, len(texts))
        out[("dask", "floor")] = _median_timing(partial(floor_run, client, len(texts)), client, inner)
        out[("dask", "idle")] = _timed(idle_run, client)
        for method in methods:
            times = inner if method == "shipped" else 1
            out[(method, "hash")] = _median_timing(
                partial(hash_run, client, scattered, vocab, ctx.max_words, encoders[method]), client, times)
            out[(method, "pairs")] = _median_timing(partial(featurise_run, client, jobs, ctx, encoders[method]), client, times)
    return out


def _median_timing(fn: Callable[[], Any], client: Any, times: int) -> tuple[float, Any, dict[str, float]]:
    """``fn`` timed ``times`` times; the sample with the median wall time (the upper one for an even count)."""
    samples = sorted((_timed(fn, client) for _ in range(times)), key=lambda t: t[0])
    return samples[len(samples) // 2]


def _time_scale(settings: Settings, jobs: list[ShardJob], ctx: ShardContext, repeat: int, partitions: int,
                naive: bool, inner: int) -> dict[str, Any]:
    """The encoders on 1 and 2 workers: ``repeat`` rounds alternating the two clusters; best round of each."""
    texts, pairs = hash_partitions(jobs, partitions), sum(j.rows.num_rows for j in jobs)
    timings: dict[tuple[str, int, str], list[tuple[float, Any, dict[str, float]]]] = {}
    for round_ in range(repeat):
        methods = ("naive", "shipped") if naive and round_ == 0 else ("shipped",)  # the naive runs last long: once
        for w in (1, 2):
            for (method, stage), timing in _time_round(settings, w, jobs, texts, ctx, methods, inner).items():
                timings.setdefault((method, w, stage), []).append(timing)
    runs: dict[str, Any] = {}
    for method in ("naive", "shipped") if naive else ("shipped",):
        for w in (1, 2):
            hash_s, hashed, hash_cpu = min(timings[(method, w, "hash")], key=lambda t: t[0])
            pair_s, featurised, pair_cpu = min(timings[(method, w, "pairs")], key=lambda t: t[0])
            assert featurised == pairs
            runs[f"{method}_w{w}"] = {
                "words": hashed, "hash_seconds": round(hash_s, 4), "words_per_s": round(hashed / hash_s),
                "pairs": featurised, "pair_seconds": round(pair_s, 4), "pairs_per_s": round(featurised / pair_s),
                "hash_cpu": hash_cpu, "pair_cpu": pair_cpu,
                "all_hash_seconds": [round(t[0], 4) for t in timings[(method, w, "hash")]],
                "all_pair_seconds": [round(t[0], 4) for t in timings[(method, w, "pairs")]],
            }
    floor = _median_per_cluster(timings, "floor", lambda wall, cpu: wall)
    idle = _median_per_cluster(timings, "idle", lambda wall, cpu: sum(cpu.values()) / wall)
    sizes = [j.rows.num_rows for j in jobs]
    return {"pairs": pairs, "shards": len(jobs), "shard_sizes": {"min": min(sizes), "max": max(sizes)},
            "hash_partitions": len(texts), "dask_floor_seconds": floor, "idle_cluster_cpu_cores": idle,
            "runs": runs, "ratios": _ratios(runs), "paired_2w_vs_1w": _paired_ratios(runs["shipped_w1"], runs["shipped_w2"])}


def _median_per_cluster(timings: dict[tuple[str, int, str], list[tuple[float, Any, dict[str, float]]]], stage: str,
                        value: Callable[[float, dict[str, float]], float]) -> dict[str, float]:
    """Median over the rounds of ``value(wall, cpu)`` for one of Dask's own stages ("floor", "idle"), per worker count."""
    return {f"w{w}": round(float(np.median([value(wall, cpu) for wall, _, cpu in timings[("dask", w, stage)]])), 4)
            for w in (1, 2)}


def _ratios(runs: dict[str, Any]) -> dict[str, float]:
    """Shipped vs naive on each cluster, and 2 workers vs 1 for each encoder (best times)."""
    names = [name for name in ("naive", "shipped") if f"{name}_w1" in runs]
    return {
        f"{metric}_shipped_vs_naive_w{w}": round(runs[f"shipped_w{w}"][metric] / runs[f"naive_w{w}"][metric], 2)
        for metric in ("words_per_s", "pairs_per_s") for w in (1, 2) if "naive" in names
    } | {
        f"{metric}_{name}_2w_vs_1w": round(runs[f"{name}_w2"][metric] / runs[f"{name}_w1"][metric], 2)
        for metric in ("words_per_s", "pairs_per_s") for name in names
    }


def _paired_ratios(one: dict[str, Any], two: dict[str, Any]) -> dict[str, Any]:
    """Per round, the 1-worker time over the 2-worker time of that round; their median, minimum and maximum."""
    paired = {}
    for metric, times in (("words_per_s", "all_hash_seconds"), ("pairs_per_s", "all_pair_seconds")):
        ratios = [round(a / b, 3) for a, b in zip(one[times], two[times])]
        paired[metric] = {"median": round(float(np.median(ratios)), 3), "min": min(ratios), "max": max(ratios),
                          "per_round": ratios}
    return paired


def hash_run(client: Any, texts: list[Any], vocab: Any, max_words: int, encoder: Encoder) -> int:
    """Every text partition hashed on the cluster (texts and vocabulary already there); returns words hashed."""
    return sum(client.gather(client.map(hash_texts, texts, vocab=vocab, max_words=max_words, encoder=encoder, pure=False)))


def _noop(index: int) -> int:
    return index


def idle_run(seconds: float = 1.0) -> float:
    """Nothing for ``seconds``: timed on an idle cluster, the CPU its own monitoring and heartbeats use."""
    time.sleep(seconds)
    return seconds


def floor_run(client: Any, tasks: int) -> int:
    """A job of ``tasks`` no-op tasks: what Dask alone costs per job (submit, schedule, gather)."""
    return len(client.gather(client.map(_noop, range(tasks), pure=False)))


def featurise_run(client: Any, jobs: list[ShardJob], ctx: ShardContext, encoder: Encoder) -> int:
    """One featurisation job as ``featurize`` runs it (Parquet bytes back to the driver); returns pairs done."""
    return sum(r.stats["rows"] for r in run_shards(client, jobs, ctx, encoder))


def run(settings: Settings, repeat: int, scales: Sequence[int], shard_rows: int = DEFAULT_SHARD_ROWS,
        partitions: int = 8, max_words: int = 30, negatives: int = 4,
        naive_scales: Sequence[int] | None = None, inner: int = 3) -> dict[str, Any]:
    """Time both encoders on 1 and 2 workers at each scale of the training pairs; returns the JSON-ready results."""
    store = Store.from_settings(settings)
    if store.exists("pairs/train.parquet"):
        source, train = store.uri("pairs/train.parquet"), store.read_table("pairs/train.parquet")
    else:
        source, train = "judged pairs of judgments_train.csv (grade >= 2)", judged_pairs(settings)["train"]
    train = train.select(["query", "doc_id", "title"])
    texts = [train["query"].combine_chunks(), train["title"].combine_chunks()]
    vocab = TrigramVocab.from_word_counts(word_counts(texts))
    check = naive_encode(vocab, texts[1], max_words), encode_vectorised(vocab, texts[1], max_words)
    assert check[0].ids.equals(check[1].ids) and check[0].counts.equals(check[1].counts), "encoders disagree"
    ctx = ShardContext(vocab, {"train": TitlePool.build(train, train)}, negatives, max_words, 7)
    results: dict[str, Any] = {"source": source, "pairs": train.num_rows, "cpus": os.cpu_count(), "repeat": repeat,
                               "inner": inner,
                               "shard_rows": shard_rows, "hash_partitions": partitions, "max_words": max_words,
                               "naive_scales": list(scales if naive_scales is None else naive_scales),
                               "negatives": negatives, "load_average_before": os.getloadavg(), "scales": {}}
    for scale in scales:
        # one cluster up at a time (an idle one still costs the driver CPU), fresh per round, 1 and 2 workers alternating
        at_scale = _time_scale(settings, scaled_shards(train, scale, shard_rows), ctx, repeat, partitions,
                               naive=scale in results["naive_scales"], inner=inner)
        results["scales"][str(scale)] = at_scale
        print(_summary(scale, at_scale), file=sys.stderr, flush=True)
    results["load_average_after"] = os.getloadavg()
    return results


def _summary(scale: int, at_scale: dict[str, Any]) -> str:
    """The ratios of one scale, one per line."""
    lines = [f"scale {scale}: {key}: {value}" for key, value in at_scale["ratios"].items()]
    lines += [f"scale {scale}: {metric}_shipped_2w_vs_1w paired median {p['median']} (rounds {p['min']}-{p['max']})"
              for metric, p in at_scale["paired_2w_vs_1w"].items()]
    floor = at_scale["dask_floor_seconds"]
    lines.append(f"scale {scale}: Dask floor, a job of {at_scale['hash_partitions']} no-op tasks: "
                 f"{floor['w1'] * 1e3:.0f} ms on 1 worker, {floor['w2'] * 1e3:.0f} ms on 2")
    idle = at_scale["idle_cluster_cpu_cores"]
    lines.append(f"scale {scale}: an idle cluster uses {idle['w1']:.3f} cores with 1 worker, {idle['w2']:.3f} with 2")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the ratios and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds, each a fresh 1-worker then 2-worker cluster")
    parser.add_argument("--inner", type=int, default=3, help="timings of the shipped path per round (median kept)")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16], help="times the training pairs are repeated")
    parser.add_argument("--naive-scales", type=int, nargs="*", default=[1, 4], help="scales where the naive loop runs too")
    parser.add_argument("--shard-rows", type=int, default=DEFAULT_SHARD_ROWS, help="rows per featurize shard")
    parser.add_argument("--partitions", type=int, default=8, help="slices of the text for the hashing stage")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="deepsent-bench-") as scratch:
        env_settings = Settings.from_env()
        has_pairs = (env_settings.store_is_s3 or Path(env_settings.store).is_dir()) and \
            Store.from_settings(env_settings).exists("pairs/train.parquet")
        store_root = env_settings.store if has_pairs else scratch
        settings = env_settings.with_overrides(store=store_root)
        results = run(settings, args.repeat, args.scales, args.shard_rows, args.partitions,
                      naive_scales=args.naive_scales, inner=args.inner)
    for scale, at_scale in results["scales"].items():
        print(_summary(int(scale), at_scale))
    write_results(args.out, results, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
