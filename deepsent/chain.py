"""The chain, declared once: its stages in order, what each consumes and produces, how it is run.

``deepsent run`` executes :data:`CHAIN` in process (:mod:`deepsent.runner`) and the
``deepsent_retrain`` DAG is built from it, one TaskFlow task per stage with the stage's
description (``dags/deepsent_retrain.py``), as kedro pipelines become Airflow DAGs. So both front
doors run the same stage functions (:mod:`deepsent.stages`) in the same order on the same inputs,
and ship by one rule: adding, removing or reordering a stage is one edit here.

A stage's ``needs`` are earlier stages whose results it takes, by name (a mapped stage's result is
the list of its grid points' results, in grid order); it returns ``returns``. A result that is not
there is an error of the chain (:class:`ChainError`), never a stage run hidden inside another.
Each stage also declares the datasets it ``reads`` and ``writes`` (:data:`DATASETS`, as kedro's catalogue names
a pipeline's data): every dataset has one writer, every read is written by an earlier stage (or is an
:data:`EXTERNAL` input), and so the order of :data:`CHAIN` follows from them (:func:`check_datasets`).
Torch-free: DAG files read it at parse time.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pipeline.core.errors import ConfigError

STAGES_MODULE = "deepsent.stages"


class ChainError(ConfigError):
    """A stage asked for a result the chain has not produced."""


#: The chain's datasets: name -> where they live (store folders, MLflow) and what they hold.
DATASETS: dict[str, str] = {
    "landing": "landing/clicks/dt=D/ and landing/catalog/dt=D/: the search logs and the catalogue files of each day",
    "clicks": "clicks/dt=D/: validated, de-duplicated, de-botted impressions (quarantine/ingest/dt=D/: the rejects)",
    "catalog": "catalog/dt=D/: the catalogue as of each day, and its changes; the latest one's live products are the "
               "corpus",
    "pairs": "pairs/{train,valid}.parquet and skipped/: clicked pairs split by query, titles shown and not clicked",
    "features": "features/<version>/: letter-trigram shards of every (n, negative source), the vocabulary",
    "mined": "mined/<source>/{train,valid}.parquet: per query, the top titles of a first stage nobody clicked for it",
    "click_lists": "click_lists/<features version>/: per held-out click pair its clicked title and negatives as text; "
                   "click_lists/held_out/: held-out click queries with the products clicked for them",
    "models": "MLflow runs of the grid (one per point) with their logged models",
    "ensemble": "the MLflow run and logged model of the LSTM-RNN + MiniLM ensemble",
    "vectors": "vectors/<key>/: every corpus title's vector through the shipped model's parts",
    "champion": "the registry's deepsent-ranker@champion (and @challenger), with the gate's figures",
    "index": "indexes/<model>/<version>/: the champion's FAISS + BM25 builds and current.json",
    "served_report": "reports/<run>/retrieval.*: the champion's served search beside BM25 on the judged set",
    "table": "reports/<run>/table.*: the Table IV of the run (every model against the baselines)",
    "latest": "reports/latest/: the last run's tables and run.json",
}
#: Inputs no stage of the run writes: the shared data the chain reads (the Home Depot judged sets, the books), the
#: judged gate set every decision is made on (``eval.decisions.gate_set``: the demo's gate slice of the training
#: judgments, a team's own judged file, or none), and
#: the champion's index as an earlier run left it (what ann mining searches: a retrain mines against the model it
#: must beat).
EXTERNAL = frozenset({"judged", "gate_set", "previous_index"})


@dataclass(frozen=True)
class Stage:
    """One stage: its name (task id), the results it takes, what it returns, how it runs, what it does."""

    name: str
    needs: tuple[str, ...]
    returns: str  # "module:Class" of its result (a StageResult)
    doc: str
    mapped: bool = False  # one run per grid point of the profile (``point``: a ModelSpec)
    training: bool = False  # runs on the training queue and pool (GPU workers in a real deployment)
    sharded: bool = False  # one task per corpus shard in a DAG (``shard``: {"shard": i, "of": n}); Dask shards in process
    retries: int | None = None  # None = the DAG's default
    reads: tuple[str, ...] = ()  # the datasets it reads (names of DATASETS, or EXTERNAL)
    writes: tuple[str, ...] = ()  # the datasets it writes (each has this one writer)

    def function(self) -> Callable[..., Any]:
        """The stage function of :mod:`deepsent.stages` (imported on first use)."""
        return getattr(importlib.import_module(STAGES_MODULE), self.name)

    def result_type(self) -> Any:
        """The class of the stage's result (imported on first use)."""
        module, _, name = self.returns.partition(":")
        return getattr(importlib.import_module(module), name)


CHAIN: tuple[Stage, ...] = (
    Stage("simulate", (), "deepsent.chain_results:Landing",
          "Simulated landing logs and the moving catalogue of their products for the profile's days (the demo's "
          "click source; none when the days are 0, where a real engine fills the landing area).",
          reads=("judged",), writes=("landing",)),
    Stage("ingest", ("simulate",), "deepsent.chain_results:Ingested",
          "Validate, normalise, de-duplicate and de-bot the simulated days, or the params' date range (idempotent); "
          "each day's catalogue first, and a click on a product not live that day quarantined.",
          reads=("landing",), writes=("clicks", "catalog")),
    Stage("pairs", ("ingest",), "deepsent.chain_results:Pairs",
          "Clicked (query, title) pairs of every ingested day, split train/valid by query, and the skipped titles.",
          reads=("clicks",), writes=("pairs",)),
    Stage("mine", ("pairs",), "deepsent.chain_results:Mined",
          "Negatives mined for every mined source of the grid (bm25: BM25's top titles of the split; ann: the "
          "champion's index's), less every title clicked for the query; nothing when the grid mines none.",
          reads=("pairs", "previous_index"), writes=("mined",)),
    Stage("featurize", ("mine",), "deepsent.chain_results:FeatureVersions",
          "Letter-trigram feature shards for every (n, negative source) of the grid, and the held-out clicks drawn "
          "once: the click lists (n = 4, skipped titles as negatives) and the held-out queries the decisions are made "
          "on when the gate setting is clicks (no judged gate set), and the click prior's fit.",
          reads=("pairs", "mined"), writes=("features", "click_lists")),
    Stage("train", ("featurize",), "encoders.training.results:TrainResult",
          "Train one grid point as an MLflow run tagged with the run; a retry resumes its checkpoint. Stopped "
          "with SIGTERM, its MLflow run ends KILLED.", mapped=True, training=True,
          reads=("features",), writes=("models",)),
    Stage("ensemble", ("featurize", "train"), "encoders.training.ensemble_build:EnsembleResult",
          "Join the best LSTM-RNN with MiniLM in one model, the mix chosen on the decision set (the judged gate set, "
          "else the held-out click lists): the smallest LSTM-RNN share within one SE of the best, 0 (MiniLM alone) "
          "unless it beats MiniLM by a bootstrap CI above zero.",
          reads=("models", "gate_set", "click_lists"), writes=("ensemble",)),
    Stage("ship", ("featurize", "train", "ensemble"), "eval.shipping:ShipChoice",
          "Choose the model to ship on the decision set: a trained model only when it beats MiniLM off the shelf by a "
          "bootstrap CI above zero, else MiniLM off the shelf (never the reported set).",
          reads=("models", "ensemble", "gate_set", "click_lists"), writes=()),
    Stage("encode", ("ship",), "encoders.search.corpus_shards:EncodeResult",
          "Encode every corpus title (the latest catalogue's live products) through the shipped model once, as shards (Dask tasks in process, one mapped task "
          "per shard in the DAG), stored as checksummed vector parts the gate, the index and the search stage read.",
          training=True, sharded=True,
          reads=("models", "ensemble", "catalog"), writes=("vectors",)),
    Stage("promote", ("featurize", "ship", "encode"), "eval.promotion.promote:PromotionResult",
          "Gate the shipped model against the champion on the decision set and promote it when it beats the champion "
          "by a bootstrap CI above zero; say so when the champion has gone stale.",
          reads=("gate_set", "click_lists", "vectors", "catalog", "champion"), writes=("champion",)),
    Stage("index", ("promote",), "encoders.search.corpus_index:IndexResult",
          "Index the champion's corpus for deepsent search: FAISS over its title vectors (read from the store, where the "
          "encode stage put them) and BM25, published atomically, with the served mode chosen on the decision set's "
          "queries (a fused mode only when it beats the better single first stage by more than the noise).",
          reads=("champion", "vectors", "catalog", "pairs", "gate_set", "click_lists"), writes=("index",)),
    Stage("search", ("promote",), "eval.results:RetrievalCompareResult",
          "The champion's served search over the whole corpus (the catalogue plus the judged titles it lacks) beside "
          "BM25's on the judged set: every served mode, "
          "Recall@10/@100, NDCG@10, significance against BM25 and latency per query.",
          reads=("champion", "vectors", "catalog", "pairs", "gate_set", "click_lists", "judged"),
          writes=("served_report",)),
    Stage("compare", ("train", "ensemble"), "eval.results:CompareResult",
          "Every trained model and the ensemble against the baselines on the judged set (NDCG@1/3/10, "
          "significance): the Table IV of this run.",
          reads=("models", "ensemble", "pairs", "judged"), writes=("table",)),
    Stage("publish", ("compare", "search", "index"), "deepsent.chain_results:Published",
          "Copy the run's table files and the served-search table to reports/latest/ (overwritten: a retry never "
          "duplicates).",
          reads=("table", "served_report", "index"), writes=("latest",)),
)


def upstream(chain: tuple[Stage, ...], name: str) -> set[str]:
    """Every stage whose result ``name`` waits for, directly or through others (what runs before it in a DAG)."""
    needs = {declared.name: declared.needs for declared in chain}
    seen: set[str] = set()
    todo = list(needs[name])
    while todo:
        if (current := todo.pop()) not in seen:
            seen.add(current)
            todo += needs.get(current, ())
    return seen


def check_datasets(chain: tuple[Stage, ...] = CHAIN) -> None:
    """A ChainError unless every dataset of ``chain`` is declared in :data:`DATASETS` and has exactly one writer, and
    every stage reads a dataset only once its writer has run: the writer waits upstream of it (so both doors order
    them), or it is the stage itself (the state a previous run left, as the gate reads the champion it replaces)."""
    writers: dict[str, list[str]] = {}
    for declared in chain:
        for name in declared.writes:
            writers.setdefault(name, []).append(declared.name)
    used = {name for declared in chain for name in declared.reads + declared.writes}
    if unknown := sorted(used - set(DATASETS) - EXTERNAL):
        raise ChainError(f"dataset {unknown[0]!r} is not declared in DATASETS")
    if two := next(((name, by) for name, by in writers.items() if len(by) > 1), None):
        raise ChainError(f"dataset {two[0]!r} has {len(two[1])} writers ({', '.join(two[1])}); a dataset has one")
    if orphan := next((name for name in DATASETS if name not in writers), None):
        raise ChainError(f"dataset {orphan!r} has no writer in the chain")
    for declared in chain:
        for name in (read for read in declared.reads if read not in EXTERNAL):
            writer = writers[name][0]
            if writer != declared.name and writer not in upstream(chain, declared.name):
                raise ChainError(f"stage {declared.name!r} reads {name!r}, written by {writer!r}, which it does not "
                                 "wait for (add it, or a stage after it, to its needs)")


def stage(name: str) -> Stage:
    """The declared stage ``name``."""
    for declared in CHAIN:
        if declared.name == name:
            return declared
    raise ChainError(f"no stage {name!r} in the chain ({', '.join(s.name for s in CHAIN)})")


def inputs_of(declared: Stage, results: dict[str, Any]) -> dict[str, Any]:
    """The results ``declared`` needs, by stage name; a ChainError when one has not been produced."""
    missing = [name for name in declared.needs if name not in results]
    if missing:
        raise ChainError(f"stage {declared.name!r} needs the result of {', '.join(map(repr, missing))}, "
                         "which the chain has not produced")
    return {name: results[name] for name in declared.needs}


def decode(declared: Stage, value: Any) -> Any:
    """A stage's result rebuilt from its JSON form (an XCom value): a list for a mapped stage, and for a sharded
    stage run as one task per shard."""
    cls = declared.result_type()
    return cls.from_dict(value) if isinstance(value, Mapping) and not declared.mapped else [cls.from_dict(v) for v in value]
