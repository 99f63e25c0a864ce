"""The corpus encoded in shards: Dask tasks in process, one shard per DAG task; each title once, stored, checked."""
from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from encoders.model.loading import load_encoder
from encoders.model.text_encoder import part_key
from encoders.model.vector_store import StoredEncoder
from encoders.search.corpus_shards import TASK_TITLES, corpus_texts, encode_corpus, encode_shard, shard_count, shard_of
from pipeline.storage.store import Store

SHARD_TITLES = 1_500  # the small data folder's corpus (about 3,500 titles): 3 shards, one of 2 Dask tasks


@pytest.fixture()
def fresh_copy(trained_run, small_data_dir: Path, tmp_path: Path):  # noqa: ANN001, ANN201
    """The trained run's settings on a copy of its store without any stored vectors, on the small data folder's
    corpus (what shards show is the same on 3,500 titles as on 48,000), two local Dask workers."""
    settings, trained = trained_run
    shutil.copytree(settings.store, tmp_path / "store", ignore=shutil.ignore_patterns("vectors"))
    return dataclasses.replace(settings, store=str(tmp_path / "store"), data_dir=small_data_dir, dask_workers=2), trained


def test_the_corpus_is_encoded_in_shards_on_dask_once_and_as_the_model_encodes(fresh_copy) -> None:  # noqa: ANN001
    settings, trained = fresh_copy
    store = Store.from_settings(settings)
    texts = corpus_texts(settings, store)
    shards = shard_count(len(texts), SHARD_TITLES)
    assert shards == 3 and len({shard_of(t, shards) for t in texts}) == 3

    result = encode_corpus(settings, trained.model_uri, shard_titles=SHARD_TITLES)
    encoder = load_encoder(trained.model_uri, settings)
    key = part_key(encoder.parts("doc")[0], encoder)
    assert result.where == "on Dask (2 worker(s))" and (result.titles, result.missing) == (len(texts), len(texts))
    assert result.encoded == {key: len(texts)}  # every title once, counted by the workers
    records = store.list_files(f"vectors/{key}", ".json")
    per_shard = [sum(shard_of(t, shards) == s for t in texts) for s in range(shards)]
    assert len(records) == sum(math.ceil(n / TASK_TITLES) for n in per_shard)  # a checksummed part per task
    assert sum(store.read_json(r)["rows"] for r in records) == len(texts)

    sample = texts[::997]
    np.testing.assert_allclose(StoredEncoder(encoder, store).encode(sample, "doc"), encoder.encode(sample, "doc"),
                               atol=1e-5)  # the workers' vectors are the model's
    again = encode_corpus(settings, trained.model_uri, shard_titles=SHARD_TITLES)
    assert (again.missing, again.encoded, again.where) == (0, {}, "in process")  # nothing twice


def test_one_task_per_shard_encodes_its_own_titles_and_together_the_corpus(fresh_copy) -> None:  # noqa: ANN001
    settings, trained = fresh_copy
    store = Store.from_settings(settings)
    texts = corpus_texts(settings, store)
    shards = shard_count(len(texts), SHARD_TITLES)
    results = [encode_shard(settings, trained.model_uri, s, shards) for s in range(shards)]
    assert sum(r.titles for r in results) == len(texts) == sum(sum(r.encoded.values()) for r in results)
    assert [r.where for r in results] == [f"shard {s} of {shards} in this task" for s in range(shards)]
    retried = encode_shard(settings, trained.model_uri, 1, shards)  # a retried task encodes nothing again
    assert retried.missing == 0 and retried.encoded == {}


def test_the_shipped_model_is_encoded_on_spawned_workers_after_openvino_ran_here(tiny_chain, settings,  # noqa: ANN001
                                                                                   tmp_path: Path) -> None:
    """The chain's case: MiniLM has run through OpenVINO in this process (the ensemble stage), then the encode stage
    starts its workers; spawned, they compile their own and finish (forked, they would hang). One worker proves it: each
    spawned worker pays its own imports and compile, which on a loaded machine is most of this test."""
    from tests.tiny_chain import copy_of

    settings = dataclasses.replace(copy_of(tiny_chain, settings), dask_workers=1,
                                   data_dir=_few_judged(tiny_chain.settings.data_dir, tmp_path / "data"))
    store = Store.from_settings(settings)
    shutil.rmtree(Path(settings.store) / "vectors")
    # the workers' start is the point: without a catalogue the corpus is the judged sets' and the pairs' titles, about
    # 70 (the catalogue's 2,300, in 117 tasks of 20 titles whose batches were mostly filler, cost 150 s of CPU)
    shutil.rmtree(Path(settings.store) / "catalog")
    for relpath in store.list_files("pairs"):
        store.write_table(relpath, store.read_table(relpath).slice(0, 10))
    uri = f"models:/deepsent-ranker/{tiny_chain.result['promotion']['champion']}"
    here = load_encoder(uri, settings)
    here.encode(["cordless drill"], "doc")
    assert here.parts("doc")[-1].module.compiled._compiled is not None  # OpenVINO ran in this process (MiniLM)
    result = encode_corpus(settings, uri, shard_titles=20)
    keys = {part_key(part, here) for part in here.parts("doc")}
    assert result.where == "on Dask (1 worker(s))" and result.missing == result.titles > 40  # 3 shards or more
    assert result.encoded == {key: result.titles for key in keys}  # each part (both halves of an ensemble), every title once
    sample = corpus_texts(settings, Store.from_settings(settings))[::7]
    np.testing.assert_allclose(StoredEncoder(here, Store.from_settings(settings)).encode(sample, "doc"),
                               here.encode(sample, "doc"), atol=1e-5)


def _few_judged(data_dir: Path, root: Path) -> Path:
    """A data folder whose judged sets hold the first 3 queries of each (the other folders linked)."""
    from tests.conftest import first_queries

    (root / "homedepot").mkdir(parents=True)
    for name in ("judgments_train.csv", "judgments_dev.csv"):
        first_queries(data_dir / "homedepot" / name, root / "homedepot" / name, 3)
    for item in data_dir.iterdir():
        if item.name not in ("homedepot", "README.md"):
            (root / item.name).symlink_to(item)
    return root
