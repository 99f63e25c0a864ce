"""The held-out clicks are drawn once by featurize (``click_lists/``) and every reader checks what it reads."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline.storage.artifacts import ArtifactError, file_facts
from pipeline.storage.store import Store
from pipeline.features.click_lists import (CHOICE_QUERIES, ROOT, draw_click_lists, held_out_clicks,
                                           valid_click_lists)
from pipeline.features.feature_files import latest_version


@pytest.fixture()
def store(tiny_features_store: Path, tmp_path: Path) -> Store:
    """A private copy of the featurised tiny store (these tests damage it)."""
    root = tmp_path / "store"
    shutil.copytree(tiny_features_store, root)
    return Store(str(root))


def test_the_stored_lists_are_the_lists_the_shards_drew(store: Store) -> None:
    version = latest_version(store)
    stored, drawn = valid_click_lists(store, version), draw_click_lists(store, version)
    assert stored.queries == drawn.queries and stored.titles == drawn.titles and stored.num_groups > 10
    assert np.array_equal(stored.group, drawn.group) and np.array_equal(stored.clicked, drawn.clicked)


def test_the_held_out_queries_are_a_sample_of_the_valid_pairs_with_every_click(store: Store) -> None:
    clicks = held_out_clicks(store)
    valid = store.read_table("pairs/valid.parquet")
    clicked: dict[str, set[str]] = {}
    for query, doc_id in zip(valid["query"].to_pylist(), valid["doc_id"].to_pylist()):
        clicked.setdefault(query, set()).add(doc_id)
    assert 10 < len(clicks) <= CHOICE_QUERIES and all(clicks[q] == clicked[q] for q in clicks)


def test_a_damaged_or_stale_click_list_is_refused_naming_featurize(store: Store) -> None:
    version = latest_version(store)
    store.write_bytes(f"{ROOT}/{version}/part-0.parquet", store.read_bytes(f"{ROOT}/{version}/part-0.parquet")[:-9])
    with pytest.raises(ArtifactError, match="part-0.parquet.*truncated or replaced.*deepsent featurize"):
        valid_click_lists(store, version)
    valid = store.read_table("pairs/valid.parquet")
    store.write_table("pairs/valid.parquet", valid.slice(1))  # the pairs rebuilt after featurize drew its queries
    with pytest.raises(ArtifactError, match="another pairs/valid.parquet"):
        held_out_clicks(store)


def test_held_out_queries_of_another_shape_are_refused_even_when_their_manifest_agrees(store: Store) -> None:
    folder = "click_lists/held_out"
    store.write_table(f"{folder}/part-0.parquet", pa.table({"query": ["drill"], "doc_id": ["1"]}))
    manifest = store.read_json(f"{folder}/manifest.json")
    store.write_json(f"{folder}/manifest.json", {**manifest, "files": file_facts(store, folder,
                                                                                 [f"{folder}/part-0.parquet"])})
    with pytest.raises(ArtifactError, match="its columns are not query, doc_ids"):
        held_out_clicks(store)


def test_a_store_without_held_out_pairs_has_no_held_out_clicks(tmp_path: Path) -> None:
    assert held_out_clicks(Store(str(tmp_path))) == {}
    store = Store(str(tmp_path))
    store.write_table("pairs/valid.parquet", pa.table({"query": ["q"], "doc_id": ["1"]}))
    with pytest.raises(ArtifactError, match="held_out/manifest.json: missing.*deepsent featurize"):
        held_out_clicks(store)
