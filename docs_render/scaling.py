"""The scaling table of docs/SCALING.md (block ``scaling-table``), built from the benchmarks' JSON in bench/results/.

For each stage: its measured rate per core (or per GPU), the engine that distributes it, the
volume a day of ``--impressions`` search impressions makes for it, and the cores (workers) that
volume needs within a ``--window-hours`` nightly window: ``ceil(volume / (rate x window))``, no
overhead added. Volumes per impression come from the ingest benchmark's simulated log (rows and
clicked rows per impression); the corpus to embed and index is ``--corpus-titles``, an assumption
stated in the table. A stage with no benchmark figure says "not measured". ``train-cuda.json``
adds the GPU training rows when it exists.

``python -m docs_render`` renders it for the default load (:data:`DEFAULT`) with every other block; this
module's command rewrites it for another load, between the same markers (the rest of the page is left as is):

    .venv/bin/python -m docs_render.scaling [--impressions 1e9] [--window-hours 4] [--epochs 1] [--corpus-titles 1e8]
        [--results bench/results] [--doc docs/SCALING.md] [--check]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from docs_render import markers
from docs_render.run_blocks import RESULTS, Sources

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "scaling-table"
BEGIN, END = markers.begin(BLOCK), markers.end(BLOCK)
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Assumptions:
    """The load and window the table is computed for."""

    impressions: float
    window_hours: float
    epochs: int
    corpus_titles: float


#: The load the docs' table is computed for: 10^9 impressions a day, a 4 h window, one epoch, 10^8 titles.
DEFAULT = Assumptions(impressions=1e9, window_hours=4.0, epochs=1, corpus_titles=1e8)


@dataclass(frozen=True)
class Stage:
    """One row: a rate per core (None when not measured) and what it is measured in."""

    name: str
    engine: str
    unit: str
    rate: float | None  # units per second per core (or per GPU)
    source: str
    volume: float | None  # units a day
    volume_note: str
    per: str = "core"


def load(results: Path, name: str) -> dict[str, Any] | None:
    """A benchmark's JSON, or None when it has not been run."""
    path = results / name
    return json.loads(path.read_text()) if path.exists() else None


def shipped_embed_row(train: dict[str, Any] | None, runtime: dict[str, Any] | None, titles: float, note: str) -> Stage:
    """The shipped model's embedding (LSTM-RNN + MiniLM): each title goes through both halves, so its CPU seconds per
    title are the sum of its halves' (a title encoded once: ``vectors/``): the LSTM-RNN's from train.json, MiniLM's
    from minilm-runtime.json's OpenVINO row (the runtime that serves it; titles/s over its threads), else train.json's."""
    cpu = {r["model"]: r for r in (train or {}).get("rows", []) if r["device"] == "cpu"}
    label = "embed (shipped: LSTM-RNN + MiniLM, CPU)"
    if not {"lstm", "minilm"} <= set(cpu):
        return Stage(label, "torch, one process", "titles", None, NOT_MEASURED, None, "")
    lstm, minilm, source = cpu["lstm"]["embed_titles_per_cpu_s"], cpu["minilm"]["embed_titles_per_cpu_s"], "train.json"
    engine = "torch, Dask shards of the corpus; vectors stored per part and weights"
    if runtime and "openvino" in runtime.get("runtimes", {}):
        minilm = runtime["runtimes"]["openvino"]["titles_per_s"] / runtime["threads"]
        source, engine = "minilm-runtime.json (OpenVINO)", "OpenVINO (MiniLM) + torch, Dask shards; vectors stored per part"
    share = (1 / minilm) / (1 / lstm + 1 / minilm)
    return Stage(label, engine, "titles", 1 / (1 / lstm + 1 / minilm),
                 f"per CPU second: 1 / (1 / {lstm:,.0f} LSTM-RNN (train.json) + 1 / {minilm:,.1f} MiniLM ({source})); "
                 f"the MiniLM half takes {share:.1%} of the time", titles, f"{note}; the packaged MiniLM half is encoded "
                 "once per store, so a nightly run pays it only for new titles")


def refresh_row(refresh: dict[str, Any] | None, titles: float) -> Stage:
    """The index refresh after a share of the catalogue changed (``bench/stages/refresh.py``, with its scaled runs):
    catalogue titles per second per core of the largest catalogue refreshed, the whole refresh timed (model load,
    stored vectors read, changed titles encoded, FAISS, BM25, the mode chosen on the decision set)."""
    label, engine = "index refresh (catalogue changed)", "ServedIndex.build: stored vectors read, changed titles encoded"
    if refresh is None:
        return Stage(label, engine, "titles", None, f"{NOT_MEASURED} (no refresh.json yet)", None, "")
    runs = [refresh, *refresh.get("scaled", [])]
    largest = max(runs, key=lambda run: run["titles"])
    measured = "; ".join(f"{run['titles']:,} titles, {run['share']:.0%} changed ({run['encoded']:,} encoded) in "
                         f"{run['refresh_s']:.1f} s" for run in runs)
    return Stage(label, engine, "titles", largest["titles"] / largest["refresh_s"] / refresh["cpus"],
                 f"refresh.json: {measured}, on {refresh['cpus']} cores, the model's load included (the rate: the "
                 f"largest)", titles, f"assumed catalogue of {titles:.0e} titles refreshed nightly")


def stages(results: Path, assume: Assumptions) -> list[Stage]:
    """Every stage's row from the JSON files present in ``results``."""
    ingest, featurize, train = load(results, "ingest.json"), load(results, "featurize.json"), load(results, "train.json")
    search, embed, train_cuda = load(results, "search.json"), load(results, "embed_memory.json"), load(results, "train-cuda.json")
    size = max(ingest["sizes"].values(), key=lambda s: s["rows"]) if ingest else None
    rows_day = assume.impressions * size["rows_per_impression"] if size else None
    clicked_day = assume.impressions * size["pairs_stage"]["clicked_rows"] / size["impressions"] if size else None
    examples_day = clicked_day * assume.epochs if clicked_day else None
    per_impression = f"{size['rows_per_impression']:.2f} rows per impression, simulated {size['days']}-day log" if size else ""
    clicked_note = (f"clicked rows ({size['pairs_stage']['clicked_rows'] / size['impressions']:.2f} per impression): "
                    "at most one new pair each, an upper bound") if size else ""
    corpus_note = f"assumed corpus of {assume.corpus_titles:.0e} titles, re-embedded nightly"
    rows: list[Stage] = []
    if size:
        one, two = size["workers"]["1"], size["workers"].get("2", size["workers"]["1"])
        rate = min(one["rows_per_cpu_s"], two["rows_per_cpu_s"])
        rows.append(Stage("ingest", "Dask: a task per landing file, one per date", "rows", rate,
                          f"ingest.json, {size['days']} days, per CPU second of 1 / 2 workers: {one['rows_per_cpu_s']:,.0f} / "
                          f"{two['rows_per_cpu_s']:,.0f} (wall per core {one['rows_per_s_per_core']:,.0f} / "
                          f"{two['rows_per_s_per_core']:,.0f}); json.loads floor {size['json_loads_floor_rows_per_cpu_s']:,.0f} "
                          f"per CPU second", rows_day, per_impression))
        pairs = size["pairs_stage"]
        rows.append(Stage("pairs", "pyarrow, one process (per-partition partials: splittable by date, not yet)", "clicks rows",
                          pairs["rows_per_cpu_s"], f"ingest.json pairs_stage, {size['days']} days, per CPU second", rows_day,
                          per_impression))
    else:
        rows += [Stage("ingest", "Dask", "rows", None, NOT_MEASURED, None, ""), Stage("pairs", "pyarrow", "rows", None, NOT_MEASURED, None, "")]
    if featurize:
        scale = max(featurize["scales"].values(), key=lambda s: s["pairs"])
        shipped = scale["runs"]["shipped_w1"]
        cpu = sum(shipped["pair_cpu"].values())  # the worker's task and Dask threads, and the driver
        rows.append(Stage("featurize", "Dask: a task per shard", "pairs", scale["pairs"] / cpu,
                          f"featurize.json, {scale['pairs']:,} pairs, 1 worker, per CPU second (wall {shipped['pairs_per_s']:,.0f}/s)",
                          clicked_day, clicked_note))
    else:
        rows.append(Stage("featurize", "Dask", "pairs", None, NOT_MEASURED, None, ""))
    lstm_cpu = next((r for r in (train or {}).get("rows", []) if r["model"] == "lstm" and r["device"] == "cpu"), None)
    epochs_note = f"pairs x {assume.epochs} epoch(s); {clicked_note}"
    rows.append(Stage("train LSTM (CPU)", "torch DDP, one process per rank (--nproc)", "examples",
                      lstm_cpu["train_examples_per_cpu_s"] if lstm_cpu else None,
                      "train.json, per CPU second" if lstm_cpu else NOT_MEASURED, examples_day, epochs_note))
    lstm_cuda = max((r for r in (train_cuda or {}).get("rows", []) if r.get("device", "").startswith("cuda")
                     and r["model"] == "lstm"), key=lambda r: r["train_examples_per_s"], default=None)
    rows.append(Stage("train LSTM (GPU)", "torch DDP, one rank per GPU", "examples",
                      lstm_cuda["train_examples_per_s"] if lstm_cuda else None,
                      f"train-cuda.json, one {train_cuda['gpu']}: the fastest LSTM-RNN row (batch {lstm_cuda['batch_size']:,}, "
                      f"{lstm_cuda['precision']}, GPU busy {lstm_cuda['gpu_util_mean']:.0f} %)" if lstm_cuda
                      else f"{NOT_MEASURED} (no train-cuda.json yet)", examples_day, epochs_note, per="GPU"))
    streamed = [r for r in (embed or {}).get("rows", []) if r["mode"] == "streamed"]
    if lstm_cpu:
        largest = max(streamed, key=lambda r: r["titles"]) if streamed else None
        shipped = largest["titles_per_s"] / train["cpu_count"] if largest else float("inf")  # the whole job: store writes too
        extra = (f"; embed_memory.json, the streamed job on {largest['titles']:,} titles: {largest['titles_per_s']:,.0f}/s on "
                 f"{train['cpu_count']} cores" if largest else "")
        rows.append(Stage("embed (LSTM, CPU)", "torch, one process, chunked Parquet parts", "titles",
                          min(lstm_cpu["embed_titles_per_cpu_s"], shipped),
                          f"the lower of train.json's encoder per CPU second ({lstm_cpu['embed_titles_per_cpu_s']:,.0f}){extra}",
                          assume.corpus_titles, corpus_note))
    else:
        rows.append(Stage("embed", "torch", "titles", None, NOT_MEASURED, None, ""))
    rows.append(shipped_embed_row(train, load(results, "minilm-runtime.json"), assume.corpus_titles, corpus_note))
    gpu_minilm = load(results, "gpu-minilm.json")
    gpu_embed = (gpu_minilm or {}).get("embed", {}).get("lstm+minilm off the shelf")
    rows.append(Stage("embed (shipped, GPU)", "torch on CUDA, Dask shards; vectors stored per part", "titles",
                      gpu_embed["titles_per_s"] if gpu_embed else None,
                      f"gpu-minilm.json, one {gpu_minilm['gpu']}: {gpu_embed['titles']:,} corpus titles in "
                      f"{gpu_embed['seconds']:.1f} s, batch {gpu_embed['batch_size']:,}, text hashing and tokenising included"
                      if gpu_embed else f"{NOT_MEASURED} (no gpu-minilm.json yet)", assume.corpus_titles, corpus_note, per="GPU"))
    scaled = max(search["runs"], key=lambda r: r["vectors"]) if search else None
    if scaled:
        approximate = scaled["indexes"].get("ivf") or scaled["indexes"]["approximate"]  # "approximate" before HNSW joined
        rate = scaled["vectors"] / approximate["build_s"] / search["threads"]
        rows.append(Stage("index (IVF build)", f"faiss, OpenMP threads on one machine ({search['threads']} here)", "vectors", rate,
                          f"search.json, {scaled['vectors']:,} vectors in {approximate['build_s']:.0f} s on {search['threads']} threads",
                          assume.corpus_titles, corpus_note))
    else:
        rows.append(Stage("index", "faiss", "vectors", None, NOT_MEASURED, None, ""))
    rows.append(refresh_row(load(results, "refresh.json"), assume.corpus_titles))
    rows.append(Stage("compare", "one process (eval)", "judged queries", None, f"{NOT_MEASURED} (no benchmark)", None,
                      "a fixed judged set: does not grow with impressions"))
    return rows


def workers_needed(stage: Stage, window_s: float) -> int | None:
    """Cores (or GPUs) for the stage's daily volume within the window; None when not measured."""
    if stage.rate is None or stage.volume is None:
        return None
    return max(1, math.ceil(stage.volume / (stage.rate * window_s)))


def table(rows: list[Stage], assume: Assumptions) -> str:
    """The Markdown table."""
    window_s = assume.window_hours * 3600
    lines = [f"| stage | distributed by | measured rate per core | from | volume for {assume.impressions:.0e} impressions a day | "
             f"cores for a {assume.window_hours:g} h window |", "|---|---|---:|---|---:|---:|"]
    for stage in rows:
        rate = f"{stage.rate:,.0f} {stage.unit}/s per {stage.per}" if stage.rate is not None else NOT_MEASURED
        volume = f"{stage.volume:.2e} {stage.unit} ({stage.volume_note})" if stage.volume is not None else stage.volume_note or "—"
        needed = workers_needed(stage, window_s)
        count = f"{needed:,} {stage.per}{'s' if needed > 1 else ''}" if needed is not None else "—"
        lines.append(f"| {stage.name} | {stage.engine} | {rate} | {stage.source} | {volume} | {count} |")
    return "\n".join(lines)


def scaling_table(sources: Sources) -> str:
    """The block: the table for the default load from the JSON under ``sources``' repository."""
    return table(stages(sources.root / RESULTS, DEFAULT), DEFAULT)


def rewrite(doc: Path, text: str) -> str:
    """``doc`` with its scaling block holding ``text`` (its other blocks, e.g. serving's, left as they are)."""
    page = doc.read_text()
    if BLOCK not in markers.names(page):
        raise SystemExit(f"{doc}: the markers {BEGIN!r} and {END!r} are missing")

    def kept(name: str) -> Callable[[], str]:
        return lambda: page.split(markers.begin(name) + "\n", 1)[1].split(markers.end(name), 1)[0]

    others = {name: kept(name) for name in markers.names(page) if name != BLOCK}
    return markers.splice(page, {**others, BLOCK: lambda: text}, str(doc))[0]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the table in the doc (or, with --check, fail when it is out of date)."""
    parser = argparse.ArgumentParser(prog="python -m docs_render.scaling", description=__doc__.split("\n")[0])
    parser.add_argument("--impressions", type=float, default=DEFAULT.impressions)
    parser.add_argument("--window-hours", type=float, default=DEFAULT.window_hours)
    parser.add_argument("--epochs", type=int, default=DEFAULT.epochs, help="training epochs over a day's new pairs")
    parser.add_argument("--corpus-titles", type=float, default=DEFAULT.corpus_titles,
                        help="titles embedded and indexed nightly (an assumption)")
    parser.add_argument("--results", type=Path, default=ROOT / RESULTS)
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "SCALING.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc's table differs from the JSON files")
    args = parser.parse_args(argv)
    assume = Assumptions(args.impressions, args.window_hours, args.epochs, args.corpus_titles)
    updated = rewrite(args.doc, table(stages(args.results, assume), assume))
    if args.check:
        current = args.doc.read_text() == updated
        print(f"{args.doc}: table {'up to date' if current else 'out of date: run python -m docs_render.scaling'}")
        return 0 if current else 1
    args.doc.write_text(updated)
    print(f"wrote the table of {args.doc}")
    return 0


BLOCKS: dict[str, Callable[[Sources], str]] = {BLOCK: scaling_table}


if __name__ == "__main__":
    sys.exit(main())
