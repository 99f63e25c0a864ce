"""The blocks of docs/RESULTS.md that come from the benchmarks' JSON (``bench/results/``) and the full grid's table.

Each block is a function of :class:`docs_render.run_blocks.Sources` returning Markdown; ``docs_render.cli``
splices them into the docs. A benchmark that has not been run says so.
"""
from __future__ import annotations

import statistics
from typing import Callable

from docs_render.run_blocks import NOT_MEASURED, RESULTS, Sources, pct, seconds, table, wrap

KS = (1, 3, 10)


def _missing(name: str) -> str:
    """What a block says when its benchmark has not been run."""
    return f"{NOT_MEASURED} (no {RESULTS}/{name})."


def table_iv(sources: Sources) -> str:
    """The full grid's Table IV (``docs/results/table-iv.csv``, the comparison's table.csv) with NDCG@1's CI."""
    rows = sources.csv("docs/results/table-iv.csv")
    if rows is None:
        return f"Table IV: {NOT_MEASURED} (no docs/results/table-iv.csv)."
    from eval.report import format_params

    out = []
    for r in rows:
        cells = [pct(float(r[f"ndcg@{k}"])) + (" (ref)" if r["reference"] == "1" else r[f"sig@{k}"]) for k in KS]
        ci = (f"{100 * float(r['ci_low@1']):+.1f}..{100 * float(r['ci_high@1']):+.1f} ({float(r['p@1']):.3f})"
              if r["ci_low@1"] else "—")
        out.append([r["name"], r["settings"], format_params(int(r["params"]) if r["params"] else None), *cells, ci])
    return table(["Model", "Settings", "Params", "NDCG@1", "NDCG@3", "NDCG@10", "NDCG@1 − reference, 95 % CI (p)"],
                 "lllrrrr", out)


def _mean_sd(values: list[float]) -> str:
    """Mean ± sample standard deviation in percent; the value alone when every value is the same."""
    if len(set(values)) == 1:
        return pct(values[0])
    return f"{pct(statistics.mean(values))} ± {pct(statistics.stdev(values))}"


def _minus(scores: dict[str, float], reference: dict[str, float]) -> str:
    """NDCG@1 / @3 / @10 of ``scores`` minus ``reference``'s, in points with a sign."""
    return " / ".join(f"{100 * (scores[f'ndcg@{k}'] - reference[f'ndcg@{k}']):+.1f}" for k in KS)


def _dev_versus(dev: dict[str, dict[str, float]]) -> str:
    """The shipped model's dev NDCG@1 / @3 / @10 minus MiniLM's, in points, ▲/▼ where the paired t-test says p < 0.05."""
    marks = [("▲" if v["diff"] > 0 else "▼") if v["p_value"] < 0.05 else "" for v in dev.values()]
    return " / ".join(f"{100 * v['diff']:+.1f}{mark}" for v, mark in zip(dev.values(), marks))


def seeds(sources: Sources) -> str:
    """The quick chain's decisions over training seeds: what shipped, the mix, and the shipped model against MiniLM
    off the shelf on the dev set."""
    data = sources.json(f"{RESULTS}/seeds.json")
    if data is None or "per_seed" not in data or "dev" not in next(iter(data["per_seed"].values())):
        return _missing("seeds.json")
    rows = []
    for seed, run in sorted(data["per_seed"].items(), key=lambda item: int(item[0])):
        margin = run["ship_margin"]
        rows.append([seed, f"**{run['shipped']}**", f"{run['mix']:.2f} (best {run['best_mix']:.2f})",
                     f"{100 * margin['diff']:+.2f} [{100 * margin['ci_low']:+.2f}, {100 * margin['ci_high']:+.2f}]",
                     " / ".join(pct(v["shipped"]) for v in run["dev"].values()), _dev_versus(run["dev"])])
    return (table(["seed", "shipped", "mix (chosen)", "challenger − MiniLM on the gate set, NDCG@10 points [95% CI]",
                   "shipped NDCG@1 / @3 / @10 (dev)", "minus MiniLM off the shelf (dev)"], "rllrll", rows)
            + "\n\n" + wrap(f"One simulated click log, the quick grid trained with each seed; the mix and the ship "
                              f"choice decided on the {next(iter(data['per_seed'].values()))['signal']}, the challenger "
                              "being the simplest trained candidate within one SE of the best; NDCG (%) on the dev set, "
                              "▲/▼ a paired t-test over its queries with p < 0.05 (none: within noise); the whole "
                              f"benchmark took {seconds(data['seconds'])}."))


def seeds_sentence(sources: Sources) -> str:
    """One sentence for the README: how often a trained model shipped over the seeds, and by how much it won."""
    data = sources.json(f"{RESULTS}/seeds.json")
    if data is None or "per_seed" not in data or "dev" not in next(iter(data["per_seed"].values())):
        return _missing("seeds.json")
    runs = list(data["per_seed"].values())
    trained = [r for r in runs if not r["off_the_shelf"]]
    won = "; ".join(f"{r['shipped']}, {100 * r['ship_margin']['diff']:+.2f} NDCG@10 points over MiniLM on the gate set, "
                    f"{_dev_versus(r['dev'])} on the dev set" for r in trained)
    below = sum(1 for r in runs for v in r["dev"].values() if v["p_value"] < 0.05 and v["diff"] < 0)
    return wrap(f"Over {len(runs)} training seeds a trained model shipped {len(trained)} time(s)"
                + (f" ({won})" if won else "") + f", MiniLM off the shelf {len(runs) - len(trained)}; significantly "
                f"below MiniLM on the dev set at {below} of {3 * len(runs)} cutoffs ([seeds](docs/RESULTS.md#seeds)).")


def minilm_finetune(sources: Sources) -> str:
    """The MiniLM tower fine-tuned on clicks for one epoch, run by run, against MiniLM off the shelf."""
    data = sources.json(f"{RESULTS}/minilm_finetune.json")
    if data is None:
        return _missing("minilm_finetune.json")
    out, random_runs = [], []
    for r in data["rows"]:
        tuned, shelf = r["dev"]["MiniLM-L6 fine-tuned"], r["dev"]["MiniLM-L6 off-the-shelf"]
        only_random = r["negative_source"] == "random" or (r["negative_source"] == "mixed" and r["negatives"] // 2 == 0)
        random_runs += [tuned] if only_random else []
        source = r["negative_source"] + (" (no skipped title: n // 2 = 0)" if only_random and r["negative_source"] != "random" else "")
        out.append([f"{source}, n = {r['negatives']}, seed {r['seed']}", f"{r['pairs']:,}", seconds(r["train_seconds"]),
                    f"{r['examples_per_s']:.1f}", *[pct(tuned[f"ndcg@{k}"]) for k in KS],
                    _minus(tuned, shelf)])
    shelf = data["rows"][0]["dev"]["MiniLM-L6 off-the-shelf"]
    out.insert(0, ["MiniLM-L6 off the shelf", "—", "—", "—", *[pct(shelf[f"ndcg@{k}"]) for k in KS], ""])
    if len(random_runs) > 1:
        out.append([f"**random negatives only, {len(random_runs)} runs**", "", "", "",
                    *[f"**{_mean_sd([t[f'ndcg@{k}'] for t in random_runs])}**" for k in KS], ""])
    return table(["Run (negatives besides in-batch)", "pairs", "training", "examples/s", "NDCG@1", "NDCG@3", "NDCG@10",
                  "minus off the shelf"], "lrrrrrrl", out)


def fusion(sources: Sources) -> str:
    """The served linear mode against ranx's fusions of the same two first stages (``bench/search/fusion.py``)."""
    data = sources.json(f"{RESULTS}/fusion.json")
    if data is None:
        return _missing("fusion.json")
    metrics = ("recall@10", "recall@100", "ndcg@10")
    out = []
    for name, system in data["systems"].items():
        fitted = ", ".join(f"{k} {v}" for k, v in system["params"].items())
        out.append([name, fitted, *[pct(system[m]) + (system[f"mark:{m}"] or (" (ref)" if system[f"p:{m}"] is None else ""))
                                    for m in metrics]])
    caption = (f"`{data['model_uri']}` on `{data['judged']}`, whole corpus of {data['corpus_titles']:,} titles; fitted on "
               f"{data['fit_queries']} held-out click queries; ▼ significantly worse than the served linear mode (paired t-test).")
    return table(["Fusion of the dense top 100 and BM25's", "fitted", "Recall@10", "Recall@100", "NDCG@10"], "llrrr", out) \
        + "\n\n" + wrap(caption)


def search_bench(sources: Sources) -> str:
    """The served champion's vector index: exact and IVF at the real corpus size and at 1M vectors."""
    data = sources.json(f"{RESULTS}/search.json")
    if data is None:
        return _missing("search.json")
    out = []
    for run in data["runs"]:
        for name, index in run["indexes"].items():
            params = index["params"]
            setting = f"nlist {params['nlist']:,}, nprobe {params['nprobe']}" if "nprobe" in params else "exact"
            out.append([f"{run['vectors']:,}", f"{index['type']} ({setting})", seconds(index["build_s"]),
                        f"{index['single']['p50_ms']:.2f} / {index['single']['p99_ms']:.2f}",
                        f"{index['batch_100']['p50_ms']:.2f} / {index['batch_100']['p99_ms']:.2f}",
                        f"{index['recall_at_10']['real_queries']:.3f}", f"{index['index_mib']:,.0f}"])
    goal = data["goal"]
    caption = (f"`{data['model_uri']}`'s title vectors (dim {data['runs'][0]['dim']}), and copies moved by seeded noise of "
               f"length {data['noise']}; latency per query (single: 1 FAISS thread; batched: 100 queries, "
               f"{data['threads']} threads), recall@10 against exact search on the dev queries the tuning never saw; "
               f"faiss {data['faiss']}, load average {data['load_avg_1m']:.1f}. Goal: p99 < {goal['p99_single_ms']:g} ms at "
               f"recall@10 ≥ {goal['recall_at_10']}.")
    return table(["vectors", "index", "build", "single p50 / p99 (ms)", "batched p50 / p99 (ms)", "recall@10", "MiB"],
                 "rlrrrrr", out) + "\n\n" + wrap(caption)


def train_bench(sources: Sources) -> str:
    """Training and embedding throughput of every tower (``bench/stages/train.py``)."""
    data = sources.json(f"{RESULTS}/train.json")
    if data is None:
        return _missing("train.json")
    out = [[r["name"], r["device"], str(r["batch_size"]), f"{r['train_examples_per_s']:,.1f}",
            f"{r['train_examples_per_cpu_s']:,.1f}", f"{r['embed_titles_per_s']:,.0f}"] for r in data["rows"]]
    return table(["Tower", "device", "batch", "training examples/s", "per CPU second", "titles/s embedded"], "llrrrr", out) \
        + "\n\n" + wrap(f"{data['cpu_count']} cores, torch {data['torch']}, n = {data['negatives']} negatives.")


def featurize_bench(sources: Sources) -> str:
    """The featurize job: shipped hashing against the naive loop, and 2 Dask workers against 1 (``bench/stages/featurize.py``)."""
    data = sources.json(f"{RESULTS}/featurize.json")
    if data is None:
        return _missing("featurize.json")
    out = []
    for scale in sorted(data["scales"], key=int):
        s = data["scales"][scale]
        paired = s["paired_2w_vs_1w"]
        naive = s["ratios"].get("pairs_per_s_shipped_vs_naive_w1")
        out.append([f"{scale}×", f"{s['pairs']:,}", f"{naive:.1f}×" if naive else "—",
                    *[f"{paired[k]['median']:.2f} ({paired[k]['min']:.2f}..{paired[k]['max']:.2f})"
                      for k in ("pairs_per_s", "words_per_s")],
                    f"{1e3 * s['dask_floor_seconds']['w1']:.0f} / {1e3 * s['dask_floor_seconds']['w2']:.0f}",
                    f"{s['idle_cluster_cpu_cores']['w1']:.3f} / {s['idle_cluster_cpu_cores']['w2']:.3f}"])
    return table(["scale", "pairs", "shipped vs naive (pairs/s, 1 worker)", "2 workers vs 1: job pairs/s, median (range)",
                  "hashing words/s", "no-op job ms (1 / 2 workers)", "idle cluster cores (1 / 2)"], "rrrrrrr", out)


def embed_memory(sources: Sources) -> str:
    """Peak memory of the vector store's write path, in chunked calls against one call (``bench/stages/embed_memory.py``)."""
    data = sources.json(f"{RESULTS}/embed_memory.json")
    if data is None:
        return _missing("embed_memory.json")
    out = [[r["mode"].replace("_", " "), f"{r['titles']:,}", f"{r['peak_growth_mib']:,.0f}", f"{r['titles_per_s']:,.0f}"]
           for r in data["rows"]]
    ratio = data["growth_ratio_4n_over_n"]
    return table(["mode", "titles", "peak growth MiB", "titles/s"], "lrrr", out) + "\n\n" + wrap(
        f"{data['model']}, chunks of {data['chunk_rows']:,} rows; peak growth at the largest size over the smallest: "
        f"streamed {ratio['streamed']:.2f}×, all at once {ratio['all_at_once']:.2f}×.")


def minilm_runtime(sources: Sources) -> str:
    """MiniLM's half of the shipped model through each runtime: titles/s, cosine to torch, parity of the figures."""
    data = sources.json(f"{RESULTS}/minilm-runtime.json")
    if data is None:
        return _missing("minilm-runtime.json")
    out = []
    for name, run in data["runtimes"].items():
        dev = " / ".join(pct(run["dev_minilm_row"][f"ndcg@{k}"]) for k in KS)
        gaps = run["max_gap"]
        out.append([name, f"{run['titles_per_s']:,.0f}", f"{run['speedup']:.2f}×",
                    f"{run['cosine_to_torch']['mean']:.4f} / {run['cosine_to_torch']['min']:.4f}", dev,
                    f"{100 * gaps['dev']:.2f} / {100 * gaps['served']:.2f}", "yes" if run["parity"] else "no"])
    return table(["runtime", "titles/s", "vs torch", "cosine to torch (mean / min)", "dev MiniLM row NDCG@1/3/10",
                  "largest gap, dev row / served (points)", "parity"], "lrrrrrl", out) + "\n\n" + wrap(
        f"`{data['model_uri']}`'s MiniLM half, {data['sample_titles']:,} corpus titles in batches of {data['batch']} "
        f"like-length titles on {data['threads']} threads, one run, titles/s the median of {data.get('rounds', 1)} "
        f"interleaved rounds and the speed-up the median of each round's ratio to torch; served = every row of `compare --retrieval` "
        f"(Recall@10/@100, NDCG@10 of dense and each served mode) with the half run by that runtime, over the whole "
        f"corpus; parity = every gap within {100 * data['parity_within']:.1f} point.")


def serve_bench(sources: Sources) -> str:
    """``deepsent serve`` end to end over loopback (``bench/search/serve.py``): per corpus and clients, throughput,
    latency, failures, CPU per query, and what a query costs in process."""
    data = sources.json(f"{RESULTS}/serve.json")
    if data is None:
        return _missing("serve.json")
    out = []
    for run in data["runs"]:
        titles = f"{run.get('titles', run['in_process']['titles']):,}"
        inside = run["in_process"]
        for level in run["http"] + ([{**run["swap"], "swap": True}] if "swap" in run else []):
            latency = level["latency_ms"]
            out.append([titles, f"{level['clients']}" + (" (a swap)" if level.get("swap") else ""),
                        f"{level['queries_per_s']:,.0f}", f"{latency['p50']:.1f} / {latency['p99']:.1f}",
                        f"{level['failed']} of {level['requests']:,}", f"{level['server_cpu_ms_per_query']:.1f}",
                        _batches(level.get("batches")),
                        f"{inside['encode_ms']['p50']:.1f} + {inside['search_ms']['p50']:.1f}"])
    goal = data["goal"]
    caption = (f"`{data['model_uri']}` served by `deepsent serve` on loopback in its default mode "
               f"({data['runs'][0]['in_process']['mode']}), k = {data['k']}, {data['queries']:,} {data['query_source']}; "
               f"each client one keep-alive connection sending queries back to back; {data['cpus']} cores shared by the "
               f"server and the load generator, load average {data['load_avg_1m']:.1f} at the start. CPU/query: the "
               f"server's own; batch: the mean queries a pass of the dynamic batcher held, and a query's mean wait "
               f"for its batch (ms); in process: the median ms of encoding one query and of searching it. Goal: ≥ "
               f"{goal['queries_per_s']} queries/s at {goal['clients']} clients with p99 ≤ {goal['p99_ms']:g} ms.")
    return table(["titles", "clients", "queries/s", "p50 / p99 (ms)", "failed", "CPU ms/query", "batch (wait ms)",
                  "in process (ms)"], "rlrrrrrr", out) + "\n\n" + wrap(caption)


def _batches(batches: dict | None) -> str:
    """A level's mean batch size and mean wait (ms), or — before the batcher."""
    return f"{batches['mean_queries']:.1f} ({batches['mean_wait_ms']:.1f})" if batches else "—"


def refresh_bench(sources: Sources) -> str:
    """The index refreshed after a share of the catalogue changed (``bench/stages/refresh.py``), at the real size and
    scaled: titles, what changed and was encoded, the refresh's time and where it went, the goal."""
    data = sources.json(f"{RESULTS}/refresh.json")
    if data is None:
        return _missing("refresh.json")
    out = []
    for run, goal in [(data, data["goal"]["refresh_s"])] + [(s, data["goal"]["scaled_refresh_s"]) for s in data.get("scaled", [])]:
        done, took = run["ingested"], run["seconds"]
        out.append([f"{run['titles']:,}", run["index_type"], f"{done['launches']:,} / {done['edits']:,} / {done['retirements']:,}",
                    f"{run['encoded']:,}", f"{run['refresh_s']:.1f}", f"{took['load_s']:.1f} / {took['vectors_s']:.1f} / "
                    f"{took['faiss_bm25_s']:.1f} / {took['files_and_mode_choice_s']:.1f} / {took['publish_s']:.1f}",
                    f"≤ {goal:g}: " + ("met" if run["goal_met"] else "missed")])
    caption = (f"`{data['model_uri']}`'s index refreshed by `ServedIndex.build` (what `deepsent index` and the "
               f"`deepsent_index` DAG run) after a catalogue delta changed {data['share']:.0%} of the products, on "
               f"{data['cpus']} cores, load average {data['load_avg_1m']:.1f} at the start; encoded: the titles no stage "
               "had encoded (the launched and retitled ones, each distinct text once); the seconds: loading the model / "
               "the corpus's vectors (read from the store, the new ones encoded) / FAISS and BM25 / the files and the "
               "served mode chosen on the decision set / publishing.")
    return table(["titles", "index", "launched / retitled / retired", "encoded", "refresh (s)",
                  "load / vectors / FAISS + BM25 / mode / publish (s)", "goal (s)"], "rlrrrll", out) + "\n\n" + wrap(caption)


BLOCKS: dict[str, Callable[[Sources], str]] = {
    "minilm-runtime": minilm_runtime,
    "table-iv": table_iv, "seeds": seeds, "seeds-sentence": seeds_sentence, "minilm-finetune": minilm_finetune,
    "fusion": fusion,
    "search-bench": search_bench, "train-bench": train_bench, "featurize-bench": featurize_bench,
    "embed-memory": embed_memory, "serve-bench": serve_bench, "refresh-bench": refresh_bench,
}
