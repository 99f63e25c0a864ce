"""The chain, declared once: its stages in order, what each consumes and produces, how it is run.

``deepsent run`` executes :data:`CHAIN` in process (:mod:`deepsent.runner`) and the
``deepsent_retrain`` DAG is built from it, one TaskFlow task per stage with the stage's
description (``dags/deepsent_retrain.py``), as kedro pipelines become Airflow DAGs. So both front
doors run the same stage functions (:mod:`deepsent.stages`) in the same order on the same inputs,
and ship by one rule: adding, removing or reordering a stage is one edit here.

A stage's ``needs`` are earlier stages whose results it takes, by name (a mapped stage's result is
the list of its grid points' results, in grid order); it returns ``returns``. A result that is not
there is an error of the chain (:class:`ChainError`), never a stage run hidden inside another.
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
          "click source; none when the days are 0, where a real engine fills the landing area)."),
    Stage("ingest", ("simulate",), "deepsent.chain_results:Ingested",
          "Validate, normalise, de-duplicate and de-bot the simulated days, or the params' date range (idempotent); "
          "each day's catalogue first, and a click on a product not live that day quarantined."),
    Stage("pairs", ("ingest",), "deepsent.chain_results:Pairs",
          "Clicked (query, title) pairs of every ingested day, split train/valid by query, and the skipped titles."),
    Stage("featurize", ("pairs",), "deepsent.chain_results:FeatureVersions",
          "Letter-trigram feature shards for every (n, negative source) of the grid, and the held-out click lists "
          "the ship choice and the gate rank (n = 4, skipped titles as negatives)."),
    Stage("train", ("featurize",), "encoders.training.results:TrainResult",
          "Train one grid point as an MLflow run tagged with the run; a retry resumes its checkpoint. Stopped "
          "with SIGTERM, its MLflow run ends KILLED.", mapped=True, training=True),
    Stage("ensemble", ("featurize", "train"), "encoders.training.ensemble_build:EnsembleResult",
          "Join the best LSTM-RNN with MiniLM in one model, the mix fitted on the held-out click lists."),
    Stage("ship", ("featurize", "train", "ensemble"), "eval.shipping:ShipChoice",
          "Choose the model to ship: the best click MRR on the held-out click lists (never a judged set)."),
    Stage("encode", ("ship",), "encoders.search.corpus_shards:EncodeResult",
          "Encode every corpus title (the latest catalogue's live products) through the shipped model once, as shards (Dask tasks in process, one mapped task "
          "per shard in the DAG), stored as checksummed vector parts the gate, the index and the search stage read.",
          training=True, sharded=True),
    Stage("promote", ("featurize", "ship", "encode"), "eval.promotion:PromotionResult",
          "Gate the shipped model against the champion on the held-out click lists (or the params' gate set) "
          "and promote it when it passes; say so when the champion has gone stale."),
    Stage("index", ("promote",), "encoders.search.corpus_index:IndexResult",
          "Index the champion's corpus for deepsent search: FAISS over its title vectors (read from the store, where the "
          "encode stage put them) and BM25, published atomically, with the served mode chosen on held-out clicks."),
    Stage("search", ("promote",), "eval.results:RetrievalCompareResult",
          "The champion's served search over the whole corpus (the catalogue plus the judged titles it lacks) beside "
          "BM25's on the judged set: every served mode, "
          "Recall@10/@100, NDCG@10, significance against BM25 and latency per query."),
    Stage("compare", ("train", "ensemble"), "eval.results:CompareResult",
          "Every trained model and the ensemble against the baselines on the judged set (NDCG@1/3/10, "
          "significance): the Table IV of this run."),
    Stage("publish", ("compare", "search", "index"), "deepsent.chain_results:Published",
          "Copy the run's table files and the served-search table to reports/latest/ (overwritten: a retry never "
          "duplicates)."),
)


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
