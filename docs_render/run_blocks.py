"""The blocks of the docs that come from the main job, the suite and the chain.

Each block is a function of :class:`Sources` (the committed JSON files) returning Markdown; ``docs_render.cli``
splices them into the docs. The run's blocks read ``docs/results/quick-run.json`` (a ``reports/latest/run.json``
the main job wrote), the suite's ``docs/results/suite.json`` (the test runner writes it), the chain's
``deepsent.chain.CHAIN`` and the served modes' ``encoders.search.modes.SERVED_MODES``. A missing file gives "not
measured yet",
never a typed figure.
"""
from __future__ import annotations

import csv
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

NOT_MEASURED = "not measured yet"
WRAP = 110


@dataclass
class Sources:
    """The JSON (and CSV) files the blocks are rendered from, read once, under the repository ``root``."""

    root: Path
    _cache: dict[str, Any] = field(default_factory=dict)

    def json(self, relpath: str) -> Any | None:
        """The JSON file at ``relpath``, or None when it is not there."""
        if relpath not in self._cache:
            path = self.root / relpath
            self._cache[relpath] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        return self._cache[relpath]

    def csv(self, relpath: str) -> list[dict[str, str]] | None:
        """The rows of the CSV file at ``relpath``, or None when it is not there."""
        path = self.root / relpath
        return list(csv.DictReader(path.open(encoding="utf-8"))) if path.exists() else None


QUICK_RUN, SUITE = "docs/results/quick-run.json", "docs/results/suite.json"
#: Where the benchmarks write their JSON (the ``bench`` package's ``RESULTS``), relative to the repository.
RESULTS = "bench/results"
#: The settings of a trained row the tables show beside its name (the rest are the recipe's defaults).
TABLE_SETTINGS = ("n=", "mix=")


def pct(value: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{100 * value:.1f}"


def seconds(value: float) -> str:
    """Seconds, one decimal below 100."""
    return f"{value:.1f} s" if value < 100 else f"{value:,.0f} s"


def minutes(value: float) -> str:
    """Seconds as minutes with one decimal."""
    return f"{value / 60:.1f} min"


def wrap(text: str) -> str:
    """A paragraph wrapped for the docs' line length, never between a number and its unit nor inside a word (a long
    test id stays whole on a line of its own)."""
    glued = re.sub(r"(\d) (s|ms|min)\b", "\\1\0\\2", text)
    return "\n".join(textwrap.wrap(glued, WRAP, break_on_hyphens=False, break_long_words=False)).replace("\0", " ")


def table(head: list[str], align: str, rows: list[list[str]]) -> str:
    """A Markdown table; ``align`` is one character per column, ``l`` or ``r``."""
    marks = {"l": ":---", "r": "---:"}
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows])


def commit_note(record: dict[str, Any]) -> str:
    """``commit abc1234`` and whether tracked files had local changes."""
    if not record.get("commit"):
        return "commit unknown"
    return f"commit {record['commit']}" + (" with local changes" if record.get("dirty") else "")


def _run(sources: Sources) -> dict[str, Any] | None:
    """The main job's last record, or None."""
    return sources.json(QUICK_RUN)


def in_chain_order(labels: Any) -> list[str]:
    """Stage timing labels (``simulate``, ``train lstm ncell=96 n=4``, ...) in the order the chain runs them."""
    from deepsent.chain import CHAIN

    names = [s.name for s in CHAIN]

    def place(label: str) -> tuple[int, str]:
        stage = label if label in names else label.split()[0]
        return (names.index(stage) if stage in names else len(names), label)

    return sorted(labels, key=place)


def quick_run_when(sources: Sources) -> str:
    """When and where the last recorded run went, its time and every stage's time."""
    run = _run(sources)
    if run is None:
        return f"The main job: {NOT_MEASURED} (no {QUICK_RUN})."
    order = run.get("stage_order") or in_chain_order(run["timings"])  # records before stage_order: the chain's order
    stages = ", ".join(f"{label} {seconds(run['timings'][label])}" for label in order)
    return wrap(f"`deepsent run --profile {run['profile']}` on {run['date']}, {commit_note(run)}, {run['cpu_count']} cores: "
                f"the job took {minutes(run['seconds'])}. Stage by stage: {stages}.")


def quick_run_ship(sources: Sources) -> str:
    """Which model the run shipped and why, and what the promotion gate decided."""
    run = _run(sources)
    if run is None:
        return f"The ship choice: {NOT_MEASURED}."
    ship, ensemble, promotion = run["ship"], run["ensemble"], run["promotion"]
    if "click_mrr" in ship:  # records before the decision set
        ranking = ", ".join(f"{name} {mrr:.4f}" for name, mrr in ship["click_mrr"].items())
        chosen = (f"Shipped: **{ship['name']}**, the best click MRR on {ship['click_lists']:,} held-out click lists "
                  f"({ranking}); the ensemble's mix (the LSTM-RNN's share of the score) is {ensemble['mix']:.2f}. ")
    else:
        m = ship["margin"]
        margin = f"{100 * m['diff']:+.2f} NDCG@10 points, CI [{100 * m['ci_low']:+.2f}, {100 * m['ci_high']:+.2f}]"
        verdict = (f"no trained model beat MiniLM off the shelf ({ship['challenger']}: {margin})" if ship["off_the_shelf"]
                   else f"it beats MiniLM off the shelf by {margin}")
        chosen = (f"Shipped: **{ship['name']}**, decided on the {ship['signal']}: {verdict}; the mix (the LSTM-RNN's "
                  f"share) {ensemble['chosen_mix']:.2f}, the smallest within one SE of the best. ")
    return wrap(chosen + f"Promotion: {promotion['decision']}, `{promotion['registered_name']}` version "
                f"{promotion['version']} (champion: version {promotion['champion']}), gated on `{promotion['gate_set']}`.")


def quick_run_served(sources: Sources) -> str:
    """The champion's served search beside BM25's over the whole corpus (the job's search stage)."""
    run = _run(sources)
    if run is None:
        return f"Served search: {NOT_MEASURED}."
    served, metrics = run["served_search"], ("recall@10", "recall@100", "ndcg@10")
    rows = []
    for r in served["rows"]:
        # records before the rename name the linear weight fusion_weight; BM25 + click prior has a weight of its own
        weight = next((r[k] for k in ("linear_weight", "fusion_weight", "prior_weight") if r.get(k) is not None), None)
        name = r["name"] + (f", w {weight:.2f}" if weight is not None else "")
        reference = r.get("reference", r["name"] == "BM25")  # records before the flag: BM25 is the reference
        cells = [pct(r[m]) + (" (ref)" if reference else r.get(f"sig:{m}") or "") for m in metrics]
        latency = r.get("latency")
        mode = "bm25" if reference else r["mode"]
        rows.append([name, mode, *cells, f"{latency['p50_ms']:.2f} / {latency['p99_ms']:.2f}" if latency else "—"])
    caption = (f"Recall@10 / Recall@100 / NDCG@10 (%) of {served['queries']} judged queries of "
               f"`{Path(served['judgments']).name}`, each searching all {served['corpus_titles']:,} titles; "
               "▲/▼ significantly better/worse than BM25 (paired t-test over queries, p < 0.05); latency per query "
               "as served, query encoding excluded.")
    return table(["System", "mode", "Recall@10", "Recall@100", "NDCG@10", "Latency p50 / p99 (ms)"], "llrrrr", rows) \
        + "\n\n" + wrap(caption)


def quick_run_table(sources: Sources) -> str:
    """The run's Table IV: NDCG@1/3/10 of every model and baseline on the judged set, with significance marks."""
    run = _run(sources)
    if run is None:
        return f"The comparison: {NOT_MEASURED}."
    from eval.report import format_params

    judged, shipped = run["table"], run["ship"]["name"]
    rows = []
    for r in judged["rows"]:
        cells = [pct(r[f"ndcg@{k}"]) + (" (ref)" if r["reference"] else r.get(f"sig@{k}") or "") for k in (1, 3, 10)]
        shown = [part for part in r["settings"].split(", ") if part.startswith(TABLE_SETTINGS)] if r["kind"] == "model" else []
        name = ", ".join([r["name"], *shown])
        bold = r["name"] == shipped
        rows.append([f"**{name}** (shipped)" if bold else name, format_params(r.get("params")),
                     *[f"**{c}**" if bold else c for c in cells]])
    caption = (f"NDCG (%) on `{Path(judged['judgments']).name}` ({judged['queries']} queries, {judged['pairs']:,} judged "
               f"titles), gain 2^grade − 1 (ranx `ndcg_burges`); ▲/▼ significantly better/worse than the reference, "
               f"{judged['reference']} (paired t-test over queries, p < 0.05).")
    return table(["Model", "Params", "NDCG@1", "NDCG@3", "NDCG@10"], "lrrrr", rows) + "\n\n" + wrap(caption)


def quick_run_models(sources: Sources) -> str:
    """The models the run trained: validation MRR on the held-out click pairs, best epoch, size."""
    run = _run(sources)
    if run is None:
        return f"Models trained: {NOT_MEASURED}."
    from eval.report import format_params

    rows = [[m["name"], f"`{m['run_id'][:8]}`", f"{m['best_epoch']} of {m['epochs_run']}", f"{m['best_metric']:.4f}",
             format_params(m["param_count"])] for m in run["models"]]
    ensemble = run["ensemble"]
    figure = (f"click MRR {ensemble['click_mrr']:.4f}" if "click_mrr" in ensemble
              else f"decision NDCG@10 {ensemble['score']:.4f}")
    rows.append([ensemble["name"], f"`{ensemble['run_id'][:8]}`", "—", figure,
                 format_params(ensemble["param_count"])])
    return table(["Model", "Run", "Best epoch", "Valid MRR", "Params"], "llrrr", rows)


def quick_run_counts(sources: Sources) -> str:
    """What the run's ingest and pairs stages counted: rows in = rows out + quarantined + duplicates + bot rows."""
    run = _run(sources)
    if run is None:
        return f"Counts: {NOT_MEASURED}."
    counts, dates = run["counts"], run["counts"]["ingest"]
    pairs = counts["pairs"]
    parts = " + ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in dates.items() if k != "rows_read")
    return wrap(f"the quick profile's simulated days: {dates['rows_read']:,} rows read = {parts}; "
                f"{pairs['train_pairs'] + pairs['valid_pairs']:,} clicked pairs ({pairs['train_pairs']:,} train / "
                f"{pairs['valid_pairs']:,} valid).")


def suite(sources: Sources) -> str:
    """The last recorded run of the test suite: counts, wall and CPU times, the slowest and the tests over budget."""
    record = sources.json(SUITE)
    if record is None:
        return f"The test suite's time: {NOT_MEASURED} (no {SUITE})."
    times = [f"pytest {minutes(record['pytest_seconds'])} on {record['workers']} worker(s)"]
    times += [f"{minutes(record['cpu_seconds'])} of CPU"] if record.get("cpu_seconds") is not None else []
    times += [f"{minutes(record['total_seconds'])} in all"] if record.get("total_seconds") is not None else []
    times += [f"install {minutes(record['install_seconds'])}"] if record.get("install_seconds") is not None else []
    slowest = ", ".join(f"`{t['test']}` {seconds(t['seconds'])}" for t in record.get("slowest", [])[:3])
    return wrap(f"`make test` on {record['date']}, {commit_note(record)}: {record['passed']} passed, {record['skipped']} "
                f"skipped, {record['failed']} failed; {', '.join(times)}." + (f" Slowest: {slowest}." if slowest else "")
                + over_budget(record))


def over_budget(record: dict[str, Any]) -> str:
    """The suite block's sentence on the tests over budget: how many, where named, how many have no reason (a report
    written before reasons were recorded says nothing of them)."""
    over, said = record.get("over_budget"), f" Over the {seconds(record.get('budget_seconds', 0))} budget per test: "
    if not over:
        return "" if over is None else f"{said}0."
    reasoned, unexplained = all("reason" in t for t in over), sum(1 for t in over if "reason" in t and not t["reason"])
    return (f"{said}{len(over)} (in `{SUITE}`" + (", with reasons" if reasoned else "")
            + (f"; {unexplained} without" if unexplained else "") + ").")


def chain(sources: Sources) -> str:
    """The chain as declared in ``deepsent/chain.py``: stage, what it waits for, result, the datasets it reads and writes, what
    it does."""
    from deepsent.chain import CHAIN

    rows = [[f"{s.name} (mapped)" if s.mapped else s.name, ", ".join(s.needs) or "–", f"`{s.result_type().__name__}`",
             ", ".join(s.reads) or "–", ", ".join(s.writes) or "–", s.doc] for s in CHAIN]
    return table(["stage", "needs", "returns", "reads", "writes", "what it does"], "llllll", rows)


def datasets(sources: Sources) -> str:
    """The chain's datasets as declared in ``deepsent/datasets.py``: each one's writer, readers, where it lives (the
    store's one table of locations) and what it holds."""
    from deepsent.chain import CHAIN
    from deepsent.datasets import DATASETS, where

    rows = [[f"`{name}`", next(s.name for s in CHAIN if name in s.writes),
             ", ".join(s.name for s in CHAIN if name in s.reads and name not in s.writes) or "–", f"`{where(name)}`",
             record.holds] for name, record in DATASETS.items()]
    return table(["dataset", "its one writer", "read by", "where (the store's table)", "what it holds"], "lllll", rows)


def served_modes(sources: Sources) -> str:
    """The served search modes as declared in ``encoders/search/modes.py``: name, first stages, formula."""
    from encoders.search.modes import SERVED_MODES

    rows = [[f"`{m.name}`", " + ".join(m.first_stages), m.formula] for m in SERVED_MODES]
    return table(["mode", "first stages", "what it serves"], "lll", rows)


def quick_run_cold_start(sources: Sources) -> str:
    """The served search on judged queries whose relevant products nobody clicked in training (cold) and the rest
    (warm), each row against BM25 and BM25 + click prior (the job's search stage)."""
    run = _run(sources)
    cold_start = (run or {}).get("served_search", {}).get("cold_start")
    if not cold_start:
        return f"Cold and warm queries: {NOT_MEASURED}."
    rows = []
    for split, part in cold_start["splits"].items():
        for r in part["rows"]:
            marks = [f"{100 * r[k]['ndcg@10']['diff']:+.1f}{r[k]['ndcg@10']['mark']}" if k in r else "—"
                     for k in ("vs_bm25", "vs_prior")]
            name = r["name"].split(" · ")[0] + (" (served default)" if r.get("served_default") else "")
            mode = "bm25" if r["key"] == "bm25" else r["mode"]  # the BM25 row is recorded as its dense-search run
            rows.append([f"{split} ({part['queries']})", name, mode, pct(r["recall@10"]), pct(r["recall@100"]),
                         pct(r["ndcg@10"]), *marks])
    prior = cold_start["prior"]
    caption = (f"Recall@10 / Recall@100 / NDCG@10 (%) of the judged queries split by the training clicks: cold, none "
               "of a query's relevant products was clicked in training; warm, the rest (queries in brackets). The last "
               "two columns: NDCG@10 points against BM25 and against BM25 + click prior, ▲/▼ significant (paired "
               f"t-test over the split's queries, p < 0.05). The prior: {prior['clicked_products']:,} products' training "
               f"clicks, its weight w = {prior['weight']:.2f} fitted on {prior['queries']} held-out click queries.")
    return table(["queries", "System", "mode", "Recall@10", "Recall@100", "NDCG@10", "vs BM25", "vs BM25 + prior"],
                 "lllrrrrr", rows) + "\n\n" + wrap(caption)


BLOCKS: dict[str, Callable[[Sources], str]] = {
    "quick-run-when": quick_run_when, "quick-run-ship": quick_run_ship, "quick-run-served": quick_run_served,
    "quick-run-table": quick_run_table, "quick-run-models": quick_run_models, "quick-run-counts": quick_run_counts,
    "quick-run-cold-start": quick_run_cold_start, "suite": suite, "chain": chain, "datasets": datasets, "served-modes": served_modes,
}
