"""The chain is built from its datasets (kedro-style): each has one writer, a stage waits for the writers of what it
reads and for the stages whose results it takes, a chain that cannot run fails when it is built, and each stage of a
real run touches only the datasets it declares."""
from __future__ import annotations

import dataclasses

import pytest

from deepsent.chain import CHAIN, ChainError, Stage, build_chain, stage
from deepsent.datasets import DATASETS
from pipeline.storage.locations import CACHES, LOCATIONS, dataset_of
from tests.tiny_chain import TinyChain


def replaced(name: str, **changes: object) -> tuple[Stage, ...]:
    """The chain with stage ``name`` changed."""
    return tuple(dataclasses.replace(s, **changes) if s.name == name else s for s in CHAIN)


def test_the_declared_chain_names_every_dataset_once_with_one_writer() -> None:
    written = [name for s in CHAIN for name in s.writes]
    assert sorted(written) == sorted(DATASETS) and len(written) == len(set(written))
    assert stage("encode").writes == ("vectors",) and "vectors" in stage("index").reads  # written once, read after
    assert "catalog" in stage("ingest").writes and "catalog" in stage("index").reads  # the corpus is the catalogue


def test_every_dataset_lives_in_the_stores_one_table_or_in_mlflow() -> None:
    assert set(LOCATIONS) <= set(DATASETS)
    assert set(DATASETS) - set(LOCATIONS) == {"models", "ensemble", "champion"}  # MLflow's runs and registry
    assert dataset_of("clicks/dt=2026-01-01/part-0.parquet") == "clicks" and dataset_of("quarantine/catalog/x") == "catalog"
    assert dataset_of("reports/latest/table.md") == "latest" and dataset_of("reports/r1/table.md") == "table"
    assert dataset_of("reports/r1/retrieval.json") == "served_report" and dataset_of("checkpoints/a/last.pt") == "working"
    assert dataset_of("elsewhere/file") is None


def test_needs_are_derived_from_the_datasets_read_and_the_results_taken() -> None:
    # no parameter exists only to order a stage: pairs takes nothing, and waits for ingest, the writer of clicks
    assert stage("pairs").takes == () and stage("pairs").needs == ("ingest",)
    assert stage("featurize").needs == ("mine",)  # pairs too, but mine already waits for it
    assert stage("promote").takes == ("featurize", "ship") and stage("promote").needs == ("featurize", "ship", "encode")
    assert stage("publish").needs == ("index", "search", "compare")  # index: no result taken, its dataset read
    for declared in CHAIN:  # every read's writer runs before the reader, in the order both doors run
        earlier = {s.name for s in CHAIN[:CHAIN.index(declared)]}
        writers = {s.name for s in CHAIN if set(s.writes) & set(declared.reads)} - {declared.name}
        assert writers | set(declared.takes) <= earlier, declared.name


def test_the_order_follows_from_the_datasets_not_from_the_declaration() -> None:
    shuffled = tuple(reversed(CHAIN))
    assert [s.name for s in build_chain(shuffled)] != [s.name for s in shuffled]
    rebuilt = build_chain(shuffled)
    for declared in rebuilt:
        assert set(declared.needs) <= {s.name for s in rebuilt[:rebuilt.index(declared)]}, declared.name


@pytest.mark.parametrize(("chain", "message"), [
    (replaced("index", writes=("index", "vectors")), "dataset 'vectors' has 2 writers (encode, index)"),
    (replaced("publish", writes=()), "dataset 'latest' has no writer in the chain"),
    (replaced("pairs", reads=("clicks", "impressions")), "dataset 'impressions' is not declared in DATASETS"),
    (replaced("ingest", reads=("landing", "latest")), "the stages wait for each other round a circle"),
    (replaced("index", after=("reindex",)), "stage 'index' waits for 'reindex', which is no stage of the chain"),
])
def test_a_chain_that_cannot_run_is_refused_when_built(chain: tuple, message: str) -> None:
    with pytest.raises(ChainError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_chain(chain)


@pytest.mark.slow
def test_each_stage_touches_only_the_datasets_it_declares(tiny_chain: TinyChain) -> None:
    """The recording catalogue: every store path a stage of the shared run read or wrote in this process belongs, by
    the one table of store locations, to a dataset the stage declares (a write: one it writes), to a cache any stage
    may add to (the vector store), or to a working folder. (Work done on Dask workers is not recorded.)"""
    stages_seen = set(tiny_chain.touched) - {""}  # "": outside any stage (the run record, written after publish)
    assert stages_seen >= {"simulate", "ingest", "pairs", "featurize", "ensemble", "encode", "index", "search", "publish"}
    undeclared = []
    for name in sorted(stages_seen):
        declared = stage(name)
        for kind, relpath in sorted(tiny_chain.touched[name]):
            dataset = dataset_of(relpath)
            allowed = (declared.writes if kind == "write" else declared.reads + declared.writes) + tuple(CACHES)
            if dataset != "working" and dataset not in allowed:
                undeclared.append(f"stage {name!r} {kind}s {relpath!r} ({dataset or 'no dataset of the store'})")
    assert undeclared == []
    assert {kind for kind, relpath in tiny_chain.touched["compare"] if dataset_of(relpath) == "vectors"} >= {"read"}
