"""The chain, declared once: its stages, what each reads and writes, how it is run.

``deepsent run`` executes :data:`CHAIN` in process (:mod:`deepsent.runner`) and the ``deepsent_retrain`` DAG is built
from it, one TaskFlow task per stage with the stage's description (``dags/deepsent_retrain.py``), as kedro's
``Node(func, inputs, outputs)`` pipelines become Airflow DAGs. So both front doors run the same stage functions
(:mod:`deepsent.stages`) in the same order on the same inputs, and ship by one rule.

A stage is its function and the datasets it ``reads`` and ``writes`` (:data:`deepsent.datasets.DATASETS`). The
results it takes are its function's parameters (named after the stages that return them; a mapped stage's result is
the list of its grid points' results, in grid order); its result type is its function's return annotation. What it
waits for (``needs``) is derived when the chain is built (:func:`build_chain`): the writers of what it reads, the
stages whose results it takes, and ``after`` (a hand-off that is no dataset; none today), less any that another of
them already waits for. The build checks every dataset (declared, one writer each, every one written) and orders the
stages by those needs, so a bad chain fails ``deepsent run`` and DAG parsing before any stage starts: adding a stage
is one function and one declaration. Torch-free: DAG files read it at parse time.
"""
from __future__ import annotations

import contextvars
import dataclasses
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from deepsent import refresh_stages, stages
from deepsent.chain_results import ChainError
from deepsent.datasets import DATASETS, EXTERNAL

__all__ = ["CHAIN", "INDEX_CHAIN", "RUNNING", "ChainError", "Stage", "build_chain", "decode", "inputs_of", "stage"]

#: Parameters of a stage function that are not another stage's result.
NOT_RESULTS = ("run", "point", "shard")
#: The stage running now in this thread (empty outside one): set by both doors around each stage, read by whatever
#: wants to tell which stage did something (a recording of the store's reads and writes, in the tests).
RUNNING: contextvars.ContextVar[str] = contextvars.ContextVar("deepsent_running_stage", default="")


@dataclass(frozen=True)
class Stage:
    """One stage: its function, what it does, the datasets it reads and writes, how it runs; ``needs`` is derived."""

    function: Callable[..., Any]
    doc: str
    reads: tuple[str, ...] = ()  # the datasets it reads (names of DATASETS, or EXTERNAL)
    writes: tuple[str, ...] = ()  # the datasets it writes (each has this one writer)
    after: tuple[str, ...] = ()  # stages it waits for although it reads nothing they write (a hand-off no dataset carries)
    mapped: bool = False  # one run per grid point of the profile (``point``: a ModelSpec)
    training: bool = False  # runs on the training queue and pool (GPU workers in a real deployment)
    sharded: bool = False  # one task per corpus shard in a DAG (``shard``: {"shard": i, "of": n}); Dask shards in process
    retries: int | None = None  # None = the DAG's default
    needs: tuple[str, ...] = ()  # set by build_chain: the stages it waits for, in chain order

    @property
    def name(self) -> str:
        """The stage's name (its task id): its function's."""
        return self.function.__name__

    @property
    def takes(self) -> tuple[str, ...]:
        """The stages whose results it takes: its function's parameters but the run, a grid point and a shard."""
        return tuple(p for p in inspect.signature(self.function).parameters if p not in NOT_RESULTS)

    def result_type(self) -> Any:
        """The class of the stage's result: its function's return annotation."""
        return typing.get_type_hints(self.function)["return"]


def _writers(declared: tuple[Stage, ...], complete: bool) -> dict[str, str]:
    """Dataset -> its one writer; a ChainError for an undeclared dataset, two writers, or (``complete``) none."""
    writers: dict[str, list[str]] = {}
    for s in declared:
        for name in s.writes:
            writers.setdefault(name, []).append(s.name)
    used = {name for s in declared for name in s.reads + s.writes}
    if unknown := sorted(used - set(DATASETS) - EXTERNAL):
        raise ChainError(f"dataset {unknown[0]!r} is not declared in DATASETS")
    if two := next(((name, by) for name, by in writers.items() if len(by) > 1), None):
        raise ChainError(f"dataset {two[0]!r} has {len(two[1])} writers ({', '.join(two[1])}); a dataset has one")
    if complete and (orphan := next((name for name in DATASETS if name not in writers), None)):
        raise ChainError(f"dataset {orphan!r} has no writer in the chain")
    return {name: by[0] for name, by in writers.items()}


def _required(declared: tuple[Stage, ...], writers: dict[str, str], given: tuple[str, ...]) -> dict[str, set[str]]:
    """Stage -> every stage it must wait for: the writers of what it reads (not itself, nor outside a partial chain: a
    stage may read the state a previous run left, as the gate reads the champion it replaces), the stages whose results it takes, ``after``
    (``given``: results handed in from outside the chain, waited for by the caller)."""
    names = [s.name for s in declared]
    if len(set(names)) < len(names):
        raise ChainError(f"stage {next(n for n in names if names.count(n) > 1)!r} is declared twice")
    required = {}
    for s in declared:
        wanted = {writers[r] for r in s.reads if r in writers} | set(s.takes) - set(given) | set(s.after)
        if missing := sorted(wanted - set(names)):
            raise ChainError(f"stage {s.name!r} waits for {missing[0]!r}, which is no stage of the chain")
        required[s.name] = wanted - {s.name}
    return required


def _ordered(declared: tuple[Stage, ...], required: dict[str, set[str]]) -> list[Stage]:
    """The stages in an order where each comes after all it waits for (declaration order among the free ones)."""
    ordered: list[Stage] = []
    left = list(declared)
    while left:
        done = {s.name for s in ordered}
        ready = next((s for s in left if required[s.name] <= done), None)
        if ready is None:
            raise ChainError("the stages wait for each other round a circle: " + ", ".join(s.name for s in left))
        ordered.append(ready)
        left.remove(ready)
    return ordered


def build_chain(declared: tuple[Stage, ...], complete: bool = True, given: tuple[str, ...] = ()) -> tuple[Stage, ...]:
    """``declared`` checked and ordered, each stage's ``needs`` derived (see the module's docstring); a ChainError when
    a dataset is undeclared, has two writers or (``complete``: the whole chain) none, or the stages wait round a
    circle. ``given``: the results a caller hands in from outside the chain (the index DAG's champion)."""
    required = _required(declared, _writers(declared, complete), given)
    ordered = _ordered(declared, required)
    position = {s.name: i for i, s in enumerate(ordered)}
    reaches: dict[str, set[str]] = {}  # stage -> everything upstream of it
    built = []
    for s in ordered:
        reaches[s.name] = set().union(*(reaches[r] | {r} for r in required[s.name]))
        implied = set().union(*(reaches[r] for r in required[s.name]))  # waited for through another need
        needs = {r for r in required[s.name] if r in s.takes or r not in implied}
        built.append(dataclasses.replace(s, needs=tuple(sorted(needs, key=position.__getitem__))))
    return tuple(built)


CHAIN: tuple[Stage, ...] = build_chain((
    Stage(stages.simulate,
          "Simulated landing logs and the moving catalogue of their products for the profile's days (the demo's "
          "click source; none when the days are 0, where a real engine fills the landing area).",
          reads=("judged",), writes=("landing",)),
    Stage(stages.ingest,
          "Validate, normalise, de-duplicate and de-bot the simulated days, or the params' date range (idempotent); "
          "each day's catalogue first, and a click on a product not live that day quarantined.",
          reads=("landing",), writes=("clicks", "catalog")),
    Stage(stages.pairs,
          "Clicked (query, title) pairs of every ingested day, split train/valid by query, and the skipped titles.",
          reads=("clicks",), writes=("pairs",)),
    Stage(stages.mine,
          "Negatives mined for every mined source of the grid (bm25: BM25's top titles of the split; ann: the "
          "champion's index's), less every title clicked for the query; nothing when the grid mines none.",
          reads=("pairs", "previous_index"), writes=("mined",)),
    Stage(stages.featurize,
          "Letter-trigram feature shards for every (n, negative source) of the grid, and the held-out clicks drawn "
          "once: the click lists (n = 4, skipped titles as negatives) and the held-out queries the decisions are made "
          "on when the gate setting is clicks (no judged gate set), and the click prior's fit.",
          reads=("pairs", "mined"), writes=("features", "click_lists")),
    Stage(stages.train,
          "Train one grid point as an MLflow run tagged with the run; a retry resumes its checkpoint. Stopped "
          "with SIGTERM, its MLflow run ends KILLED.", mapped=True, training=True,
          reads=("features",), writes=("models",)),
    Stage(stages.ensemble,
          "Join the best LSTM-RNN with MiniLM in one model, the mix chosen on the decision set (the judged gate set, "
          "else the held-out click lists): the smallest LSTM-RNN share within one SE of the best, 0 (MiniLM alone) "
          "unless it beats MiniLM by a bootstrap CI above zero.",
          reads=("models", "gate_set", "click_lists"), writes=("ensemble",)),
    Stage(stages.ship,
          "Choose the model to ship on the decision set: a trained model only when it beats MiniLM off the shelf by a "
          "bootstrap CI above zero, else MiniLM off the shelf (never the reported set).",
          reads=("models", "ensemble", "gate_set", "click_lists"), writes=()),
    Stage(stages.encode,
          "Encode every corpus title (the latest catalogue's live products) through the shipped model once, as shards (Dask tasks in process, one mapped task "
          "per shard in the DAG), stored as checksummed vector parts the gate, the index and the search stage read.",
          training=True, sharded=True,
          reads=("models", "ensemble", "catalog"), writes=("vectors",)),
    Stage(stages.promote,
          "Gate the shipped model against the champion on the decision set and promote it when it beats the champion "
          "by a bootstrap CI above zero; say so when the champion has gone stale.",
          reads=("gate_set", "click_lists", "vectors", "catalog", "champion"), writes=("champion",)),
    Stage(stages.index,
          "Index the champion's corpus for deepsent search: FAISS over its title vectors (read from the store, where the "
          "encode stage put them) and BM25, published atomically, with the served mode chosen on the decision set's "
          "queries (a fused mode only when it beats the better single first stage by more than the noise).",
          reads=("champion", "vectors", "catalog", "pairs", "gate_set", "click_lists"), writes=("index",)),
    Stage(stages.search,
          "The champion's served search over the whole corpus (the catalogue plus the judged titles it lacks) beside "
          "BM25's on the judged set: every served mode, "
          "Recall@10/@100, NDCG@10, significance against BM25 and latency per query.",
          reads=("champion", "vectors", "catalog", "pairs", "gate_set", "click_lists", "judged"),
          writes=("served_report",)),
    Stage(stages.compare,
          "Every trained model and the ensemble against the baselines on the judged set (NDCG@1/3/10, "
          "significance): the Table IV of this run.",
          reads=("models", "ensemble", "pairs", "judged"), writes=("table",)),
    Stage(stages.publish,
          "Copy the run's table files and the served-search table to reports/latest/ (overwritten: a retry never "
          "duplicates).",
          reads=("table", "served_report", "index"), writes=("latest",)),
))

#: The index DAG's stages (``dags/deepsent_index.py``): the champion (``given`` by the DAG's first task, the ``model_uri``
#: param or the latest promotion) re-encoded where the catalogue moved and re-indexed, by the chain's own functions.
INDEX_CHAIN: tuple[Stage, ...] = build_chain((
    Stage(refresh_stages.encode,
          "Encode the corpus titles the champion's stored vectors lack (new and retitled products), one mapped task per "
          "shard on the training queue, as the chain's encode stage.", training=True, sharded=True,
          reads=("champion", "catalog"), writes=("vectors",)),
    Stage(refresh_stages.build_index,
          "Index the champion's title vectors on the latest catalogue (exact up to 20,000 titles, IVF above), published "
          "atomically with its served mode, as the chain's index stage.",
          reads=("champion", "vectors", "catalog", "pairs", "gate_set", "click_lists"), writes=("index",)),
), complete=False, given=("champion",))


def running(declared: Stage, *args: Any, **kwargs: Any) -> Any:
    """``declared``'s function called with these arguments, :data:`RUNNING` naming it meanwhile."""
    token = RUNNING.set(declared.name)
    try:
        return declared.function(*args, **kwargs)
    finally:
        RUNNING.reset(token)


def stage(name: str) -> Stage:
    """The declared stage ``name``."""
    for declared in CHAIN:
        if declared.name == name:
            return declared
    raise ChainError(f"no stage {name!r} in the chain ({', '.join(s.name for s in CHAIN)})")


def inputs_of(declared: Stage, results: dict[str, Any]) -> dict[str, Any]:
    """The results ``declared`` takes, by stage name; a ChainError when one has not been produced."""
    missing = [name for name in declared.takes if name not in results]
    if missing:
        raise ChainError(f"stage {declared.name!r} needs the result of {', '.join(map(repr, missing))}, "
                         "which the chain has not produced")
    return {name: results[name] for name in declared.takes}


def decode(consumer: Stage, name: str, value: Any) -> Any:
    """The result ``consumer`` takes as ``name``, rebuilt from its JSON form (an XCom value) as the consumer's function
    annotates it: a list for a mapped stage's results, and for a sharded stage run as one task per shard."""
    wanted = typing.get_type_hints(consumer.function)[name]
    cls = typing.get_args(wanted)[0] if typing.get_origin(wanted) is list else wanted
    return cls.from_dict(value) if isinstance(value, Mapping) else [cls.from_dict(v) for v in value]
