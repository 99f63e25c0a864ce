"""The chain names its datasets (kedro-style): each has one writer, and a stage reads one only once its writer ran."""
from __future__ import annotations

import dataclasses

import pytest

from deepsent.chain import CHAIN, DATASETS, ChainError, check_datasets, stage


def replaced(name: str, **changes: object) -> tuple:
    """The chain with stage ``name`` changed."""
    return tuple(dataclasses.replace(s, **changes) if s.name == name else s for s in CHAIN)


def test_the_declared_chain_names_every_dataset_once_with_one_writer() -> None:
    check_datasets()
    written = [name for s in CHAIN for name in s.writes]
    assert sorted(written) == sorted(DATASETS) and len(written) == len(set(written))
    assert stage("encode").writes == ("vectors",) and "vectors" in stage("index").reads  # written once, read after
    assert "catalog" in stage("ingest").writes and "catalog" in stage("index").reads  # the corpus is the catalogue


@pytest.mark.parametrize(("chain", "message"), [
    (replaced("index", writes=("index", "vectors")), "dataset 'vectors' has 2 writers (encode, index)"),
    (replaced("publish", writes=()), "dataset 'latest' has no writer in the chain"),
    (replaced("pairs", reads=("clicks", "impressions")), "dataset 'impressions' is not declared in DATASETS"),
    (replaced("index", needs=("ship",)), "stage 'index' reads 'champion', written by 'promote', which it does not wait for"),
])
def test_a_chain_whose_datasets_do_not_order_it_is_refused(chain: tuple, message: str) -> None:
    with pytest.raises(ChainError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_datasets(chain)
