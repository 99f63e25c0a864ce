"""The held-out clicks, drawn once by ``featurize`` and read by every consumer (the ``click_lists`` dataset).

Two views of the validation click pairs (``pairs/valid.parquet``: queries that never reached training) are written
under ``click_lists/`` with a manifest each (sizes and SHA-256 of the files, what they were drawn from), and checked
against it by every reader:

- ``click_lists/<features version>/``: per valid pair, its clicked title then its n negatives as text
  (:func:`valid_click_lists`, what the ensemble's mix, the ship choice and the gate rank). Feature shards store
  trigram ids, not titles, so :func:`write_click_lists` draws the negatives again exactly as the shards drew them
  (same pairs, manifest parameters and seeded partitions) and checks every doc id against the stored shards.
- ``click_lists/held_out/``: a seeded sample of up to :data:`CHOICE_QUERIES` held-out queries with their clicked
  doc ids (:func:`held_out_clicks`, what the index's mode choice, the retrieval gate and the search stage's
  served weight are measured on).

Nothing here reads a judged set.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.core.errors import DeepsentError
from pipeline.features.feature_files import SPLITS, check_skipped, read_manifest, verify_split
from pipeline.features.negatives import RANDOM, TitlePool, draw_negatives, partition_rng
from pipeline.features.pair_check import check_pairs
from pipeline.features.shards import plan_shards
from pipeline.features.skipped import SkipIndex
from pipeline.storage import artifacts
from pipeline.storage.quarantine import Quarantine
from pipeline.storage.store import Store
from pipeline.storage.locations import folder
from pipeline.features.feature_files import feature_root

ROOT = folder("click_lists")
HELD_OUT = f"{ROOT}/held_out"
REBUILD = "deepsent featurize"
#: Held-out queries a served index's default mode is chosen on (the first ones in a seeded order).
CHOICE_QUERIES = 500
LISTS_SCHEMA = pa.schema([("query", pa.string()), ("title", pa.string()), ("group", pa.int32()),
                          ("clicked", pa.bool_())])
HELD_OUT_SCHEMA = pa.schema([("query", pa.string()), ("doc_ids", pa.list_(pa.string()))])


@dataclass(frozen=True)
class ClickLists:
    """Flat candidate lists: ``group[i]`` is the valid pair of row i, ``clicked[i]`` marks its clicked title."""

    queries: list[str]
    titles: list[str]
    group: np.ndarray
    clicked: np.ndarray

    @property
    def num_groups(self) -> int:
        """Number of click pairs (one candidate list each)."""
        return int(self.group.max()) + 1 if self.group.size else 0


def seeded_sample(items: list[str], seed: int, limit: int) -> list[str]:
    """Up to ``limit`` of the sorted distinct ``items``, a seeded sample kept in sorted order."""
    distinct = sorted(set(items))
    return [distinct[i] for i in sorted(np.random.default_rng(seed).permutation(len(distinct))[:limit])]


def _publish(store: Store, folder: str, table: pa.Table, record: dict[str, object]) -> None:
    """Write ``table`` as ``folder``/part-0.parquet, then the manifest recording it (the manifest last: a reader
    that finds a manifest finds the file it names)."""
    path = f"{folder}/part-0.parquet"
    store.write_table(path, table)
    store.write_json(f"{folder}/manifest.json", {**record, "files": artifacts.file_facts(store, folder, [path])})


def _checked_table(store: Store, folder: str, schema: pa.Schema) -> tuple[pa.Table, dict[str, object]]:
    """The table under ``folder`` once its manifest's files check out and it has ``schema``, and the manifest."""
    manifest = artifacts.read_manifest(store, f"{folder}/manifest.json", REBUILD)
    artifacts.require_keys(store, f"{folder}/manifest.json", manifest, ("files",), REBUILD)
    artifacts.verify_files(store, folder, manifest["files"], REBUILD)
    table = store.read_table(f"{folder}/part-0.parquet")
    if table.schema != schema:
        raise artifacts.ArtifactError(store.uri(folder), f"its columns are not {', '.join(schema.names)}", REBUILD)
    return table, manifest


def draw_click_lists(store: Store, version: str) -> ClickLists:
    """The validation click pairs of features ``version``, drawn as featurize drew them: clicked title first, then
    its n negatives (checked against the stored shards)."""
    manifest = read_manifest(store, version)
    params = manifest["params"]
    source, n, seed = params.get("negative_source", RANDOM), int(params["negatives"]), int(params["seed"])
    scratch = Quarantine("click-lists")  # featurize already reported these rows
    checked = {s: check_pairs(store, f"pairs/{s}.parquet", s, scratch) for s in SPLITS}
    if checked["valid"].sha256 != manifest["source"]["valid"]["sha256"]:
        raise DeepsentError(f"{store.uri('pairs/valid.parquet')}: changed since features {version} were built; "
                            "re-run featurize")
    pool = TitlePool.build(checked["valid"].clean, pa.concat_tables([checked[s].clean for s in SPLITS]))
    skips = SkipIndex.build(check_skipped(store, checked, scratch, source)["valid"].clean) if source != RANDOM else None
    verify_split(store, manifest, "valid")
    stored = store.read_table(f"{feature_root(version)}/valid", columns=["pair_id", "neg_doc_ids"])
    expected = dict(zip(stored["pair_id"].to_pylist(), stored["neg_doc_ids"].to_pylist()))
    queries: list[str] = []
    titles: list[str] = []
    for job in plan_shards("valid", checked["valid"].clean, seed, int(params["shard_rows"])):
        drawn = draw_negatives(job.rows, n, source, pool, skips, partition_rng(seed, "valid", job.index))
        negatives = np.array(drawn.titles.to_pylist(), dtype=object).reshape(job.rows.num_rows, n)
        doc_ids = np.array(drawn.doc_ids.to_pylist(), dtype=object).reshape(job.rows.num_rows, n)
        for pair_id, query, title, negs, ids in zip(job.rows["pair_id"].to_pylist(), job.rows["query"].to_pylist(),
                                                    job.rows["title"].to_pylist(), negatives, doc_ids):
            if expected.get(pair_id) != list(ids):
                raise DeepsentError(f"features {version}: valid pair {pair_id} has other negatives than the stored "
                                    "shards (features built by another release?)")
            queries += [query] * (n + 1)
            titles += [title, *negs]
    groups = np.repeat(np.arange(len(queries) // (n + 1)), n + 1)
    clicked = np.tile(np.array([True] + [False] * n), len(queries) // (n + 1))
    return ClickLists(queries, titles, groups, clicked)


def write_click_lists(store: Store, version: str) -> ClickLists:
    """Draw the click lists of features ``version`` once and store them under ``click_lists/<version>/``."""
    lists = draw_click_lists(store, version)
    table = pa.table([pa.array(lists.queries, pa.string()), pa.array(lists.titles, pa.string()),
                      pa.array(lists.group, pa.int32()), pa.array(lists.clicked, pa.bool_())], schema=LISTS_SCHEMA)
    _publish(store, f"{ROOT}/{version}", table, {"features_version": version, "lists": lists.num_groups})
    return lists


def valid_click_lists(store: Store, version: str) -> ClickLists:
    """The stored click lists of features ``version`` (written by featurize), checked against their manifest."""
    table, manifest = _checked_table(store, f"{ROOT}/{version}", LISTS_SCHEMA)
    if manifest.get("features_version") != version:
        raise artifacts.ArtifactError(store.uri(f"{ROOT}/{version}"), f"drawn for features "
                                      f"{manifest.get('features_version')!r}, not {version}", REBUILD)
    return ClickLists(table["query"].to_pylist(), table["title"].to_pylist(),
                      table["group"].to_numpy().astype(np.int64), table["clicked"].to_numpy(zero_copy_only=False))


def _valid_sha256(store: Store) -> str:
    """SHA-256 of the held-out pairs file as it is now."""
    return hashlib.sha256(store.read_bytes("pairs/valid.parquet")).hexdigest()


def write_held_out_clicks(store: Store, seed: int, limit: int = CHOICE_QUERIES) -> dict[str, set[str]]:
    """Draw up to ``limit`` held-out queries (a seeded sample of ``pairs/valid.parquet``) with their clicked doc ids
    once, and store them under ``click_lists/held_out/`` with the pairs file they came from."""
    table = store.read_table("pairs/valid.parquet", columns=["query", "doc_id"])
    clicked: dict[str, set[str]] = {}
    for query, doc_id in zip(table["query"].to_pylist(), table["doc_id"].to_pylist()):
        clicked.setdefault(query, set()).add(doc_id)
    sample = {query: clicked[query] for query in seeded_sample(list(clicked), seed, limit)}
    rows = pa.table([pa.array(list(sample), pa.string()), pa.array([sorted(ids) for ids in sample.values()],
                                                                   pa.list_(pa.string()))], schema=HELD_OUT_SCHEMA)
    _publish(store, HELD_OUT, rows, {"pairs_valid_sha256": _valid_sha256(store), "seed": seed, "limit": limit,
                                     "queries": len(sample)})
    return sample


def held_out_clicks(store: Store) -> dict[str, set[str]]:
    """The held-out queries featurize drew (query -> clicked doc ids), checked against their manifest and against
    the pairs file they were drawn from; empty when the store has no held-out pairs."""
    if not store.exists("pairs/valid.parquet"):
        return {}
    table, manifest = _checked_table(store, HELD_OUT, HELD_OUT_SCHEMA)
    if manifest.get("pairs_valid_sha256") != _valid_sha256(store):
        raise artifacts.ArtifactError(store.uri(HELD_OUT), "drawn from another pairs/valid.parquet than the store's "
                                      "(the pairs were rebuilt since)", REBUILD)
    return {query: set(ids) for query, ids in zip(table["query"].to_pylist(), table["doc_ids"].to_pylist())}
