"""The serving blocks: the served index at 10^7 titles and what the served index costs in quality (docs/RESULTS.md),
and serving's row of docs/SCALING.md (replicas and index shards for a day's traffic), each from a benchmark's JSON.

The serving row's assumptions are stated in the block: the day's searches (one per impression: a result page), a
peak factor over the day's mean (:data:`PEAK_FACTOR`), cores per replica (the benchmark's machine), and the share
of a machine's memory its index slice may take (:data:`INDEX_MEMORY_SHARE`, the rest for BM25, titles, the model).
"""
from __future__ import annotations

import math
from typing import Any, Callable

from docs_render.bench_blocks import _missing
from docs_render.run_blocks import RESULTS, Sources, table, wrap

#: Peak queries/s over the day's mean (an assumption: evening traffic in a shop's search is a few times its mean).
PEAK_FACTOR = 3.0
#: The share of a machine's memory one index slice may take (an assumption; the rest: BM25, titles, the model, OS).
INDEX_MEMORY_SHARE = 0.5


def search_streamed(sources: Sources) -> str:
    """The served index over 10^7 streamed vectors (``bench/search/index_streamed.py``)."""
    data = sources.json(f"{RESULTS}/search-streamed.json")
    if data is None:
        return _missing("search-streamed.json")
    rows, goal = [], data["goal"]
    for run in data["runs"]:
        params = run["params"]
        rows.append([f"{run['vectors']:,}", f"{run['type']} ({params.get('codes', 'float32')}, nlist "
                     f"{params.get('nlist', 0):,}, nprobe {params.get('nprobe', 0)})", f"{run['build_s']:,.0f} s",
                     f"{run['single']['p50_ms']:.2f} / {run['single']['p99_ms']:.2f}", f"{run['recall_at_10']:.3f}",
                     f"{run['index_gib']:.1f} / {run['peak_rss_gib']:.1f}", "met" if run["goal_met"] else "missed"])
    run = data["runs"][0]
    caption = (f"The index `deepsent index` builds for that many titles, over {run['real_vectors']:,} real title "
               f"vectors (dim {run['dim']}) and copies of them moved by seeded noise of length {run['noise']:g}, made "
               f"part by part on each pass (never held whole); nprobe tuned on {params.get('tune_queries', 0):,} training "
               f"click queries; latency per query one at a time on one FAISS thread and recall@10 against exact search "
               f"over the whole corpus, both on {run['single_on'].split(' (')[0]}; memory: the index's lists / the "
               f"process's peak resident set, of {run['machine_memory_gib']:g} GiB; faiss {data['faiss']}, "
               f"{data['cpus']} cores, load average {data['load_avg_1m']:.1f} when it ended. Goal: p99 ≤ "
               f"{goal['p99_single_ms']:g} ms, recall@10 ≥ {goal['recall_at_10']}, within {goal['memory_gib']} GB.")
    return table(["vectors", "index", "build", "single p50 / p99 (ms)", "recall@10", "GiB", "goal"], "rlrrrrl",
                 rows) + "\n\n" + wrap(caption)


def served_quality(sources: Sources) -> str:
    """The champion's served default through an exact index and through the served one
    (``bench/search/served_quality.py``)."""
    data = sources.json(f"{RESULTS}/served-quality.json")
    if data is None:
        return _missing("served-quality.json")
    metrics = list(data["served_minus_exact"])
    rows = []
    for name in ("exact", "served"):
        run = data[name]
        rows.append([name, run["index"], run["mode"], *(f"{100 * run[m]:.2f}" for m in metrics),
                     f"{run['latency']['p50_ms']:.2f} / {run['latency']['p99_ms']:.2f}"])
    tests = data["served_minus_exact"]
    rows.append(["served − exact", "", "", *(f"{100 * t['diff']:+.2f} (p {t['p']:.2f}){t['mark']}" for t in
                                             (tests[m] for m in metrics)), ""])
    approx = data["served"]["approximate"] or {}
    caption = (f"`{data['model_uri']}` on {data['judgments'].rsplit('/', 1)[-1]} ({data['queries']} queries), its "
               f"served default mode over the run's corpus plus the judged titles it lacks, searched through an exact "
               f"index and through the one `deepsent index` serves at this size (exact up to {data['exact_max']:,} "
               f"titles); the served dense stage's recall@10 against exact: "
               f"{approx.get('recall@10_vs_exact', 1.0):.3f}; p: the retrieval table's paired t-test over queries "
               f"(▲/▼ significant); latency per query as served, query encoding excluded. Quality kept: "
               f"{'yes' if data['quality_kept'] else 'no'}.")
    return table(["index", "type", "mode", *metrics, "latency p50 / p99 (ms)"], "lll" + "r" * (len(metrics) + 1),
                 rows) + "\n\n" + wrap(caption)


def best_level(serve: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The real corpus's client level with the most queries/s whose p99 meets the goal (True), else its fastest
    level (False)."""
    run, goal = serve["runs"][0], serve["goal"]["p99_ms"]
    meeting = [level for level in run["http"] if level["latency_ms"]["p99"] <= goal]
    chosen = max(meeting or run["http"], key=lambda level: level["queries_per_s"])
    return chosen, bool(meeting)


def serving_scale(sources: Sources, impressions: float = 1e9, corpus_titles: float = 1e8) -> str:
    """Serving's row of SCALING.md: queries/s per core at the p99 goal (serve.json), the replicas a day of
    ``impressions`` searches needs at its peak, and the index shards ``corpus_titles`` need (search-streamed.json)."""
    serve, streamed = sources.json(f"{RESULTS}/serve.json"), sources.json(f"{RESULTS}/search-streamed.json")
    if serve is None:
        return _missing("serve.json")
    level, at_goal = best_level(serve)
    cores = serve["cpus"]
    per_core = level["queries_per_s"] / cores
    peak = impressions / 86_400 * PEAK_FACTOR
    replicas = math.ceil(peak / level["queries_per_s"])
    measured = (f"{level['queries_per_s']:,.0f} queries/s at {level['clients']} client(s), p99 "
                f"{level['latency_ms']['p99']:.0f} ms ({'within' if at_goal else 'no level within'} the "
                f"{serve['goal']['p99_ms']:g} ms goal{'' if at_goal else ': the fastest level'}), on {cores} cores shared "
                f"with the load generator")
    rows = [["serve (queries)", "replicas behind a load balancer (`deepsent serve`, readiness on /readyz)",
             f"{per_core:,.0f} queries/s per core", f"serve.json: {measured}",
             f"{peak:,.0f} queries/s at peak ({impressions:.0e} searches a day, peak {PEAK_FACTOR:g}× the mean)",
             f"{replicas:,} replicas of {cores} cores"]]
    if streamed:
        run = streamed["runs"][0]
        per_vector = run["index_gib"] / run["vectors"]
        budget = run["machine_memory_gib"] * INDEX_MEMORY_SHARE
        shards = max(1, math.ceil(corpus_titles * per_vector / budget))
        rows.append(["serve (index memory)", "index slices, a query searched in each and the tops merged",
                     f"{per_vector * 2**30:,.0f} bytes per title", f"search-streamed.json: {run['vectors']:,} titles in "
                     f"{run['index_gib']:.1f} GiB ({run['type']}, {run['params'].get('codes', 'float32')})",
                     f"{corpus_titles:.0e} titles: {corpus_titles * per_vector:,.0f} GiB",
                     f"{shards:,} slice(s) of ≤ {budget:g} GiB ({INDEX_MEMORY_SHARE:.0%} of a {run['machine_memory_gib']:g} "
                     f"GiB machine) per replica"])
    return table(["stage", "distributed by", "measured", "from", "load", "needed"], "llrlrr", rows)


BLOCKS: dict[str, Callable[[Sources], str]] = {
    "search-streamed": search_streamed, "served-quality": served_quality, "serving-scale": serving_scale,
}
