"""Feature shards -> PairBatch, streamed shard by shard (raw texts: :mod:`encoders.towers.text_batches`).

:class:`FeatureShardDataset` yields ready batches (use ``DataLoader(ds, batch_size=None)``):
per epoch it visits the shards of a split in a seeded order, shuffles the rows inside each
shard, and cuts consecutive rows into batches (a batch may span two shards; at most two
shards are in memory). The order is a function of (seed, epoch) only. With
``shard_for_rank(rank, world)`` each data-parallel rank gets a contiguous slice of every
global batch, so all ranks run the same number of steps on the same global batches.
"""
from __future__ import annotations

import copy
import os
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from encoders.towers.batch import PairBatch, TextBatch
from encoders.towers.text_batches import as_array, sentence_batch
from pipeline.core.defaults import SEED
from pipeline.core.errors import ConfigError
from pipeline.features.feature_files import latest_version, read_manifest, verify_split
from pipeline.features.skipped import SKIPPED_ROOT
from pipeline.storage.store import Store

FEATURE_COLUMNS = ["q_ids", "q_counts", "d_ids", "d_counts"]
#: What a tower that reads text takes from a shard: the query, the clicked title, the negatives' ids.
TEXT_COLUMNS = ["query", "title", "neg_doc_ids"]


def collate_rows(rows: pa.Table, num_negatives: int) -> PairBatch:
    """Shard rows -> PairBatch (docs example-major: clicked title, then its negatives)."""
    return PairBatch(
        query=sentence_batch(rows["q_ids"], rows["q_counts"]),
        docs=sentence_batch(pc.list_flatten(as_array(rows["d_ids"])), pc.list_flatten(as_array(rows["d_counts"]))),
        num_negatives=num_negatives,
    )


def collate_texts(rows: pa.Table, num_negatives: int, titles: dict[str, str]) -> PairBatch:
    """Shard rows -> PairBatch of texts (docs example-major), the negatives' titles looked up in ``titles``."""
    docs: list[str] = []
    for title, negatives in zip(rows["title"].to_pylist(), rows["neg_doc_ids"].to_pylist()):
        docs.append(title)
        unknown = [doc_id for doc_id in negatives if doc_id not in titles]
        if unknown:
            raise ConfigError(f"negative {unknown[0]!r} has no title among the split's clicked or skipped titles "
                              "(a tower that reads text looks the negatives' titles up there)")
        docs.extend(titles[doc_id] for doc_id in negatives)
    return PairBatch(TextBatch(rows["query"].to_pylist()), TextBatch(docs), num_negatives)


class FeatureShardDataset(IterableDataset):
    """Batches of one split of ``features/<version>/`` as PairBatch, deterministic per (seed, epoch)."""

    def __init__(
        self,
        store: Store,
        version: str | None = None,
        split: str = "train",
        batch_size: int = 256,
        shuffle: bool = True,
        seed: int = SEED,
        drop_last: bool = False,
        texts: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.store = store
        self.version = version or latest_version(store)
        self.manifest = read_manifest(store, self.version)
        if split not in self.manifest["splits"]:
            raise ValueError(f"split {split!r} not in features {self.version}")
        verify_split(store, self.manifest, split)
        info = self.manifest["splits"][split]
        self.split, self.batch_size, self.shuffle, self.seed, self.drop_last = split, batch_size, shuffle, seed, drop_last
        self.files = [shard["path"] for shard in info["shards"]]
        self.num_rows = int(info["rows_out"])
        self.num_negatives = int(self.manifest["negatives"])
        self.vocab_size = int(self.manifest["vocab"]["size"])
        self.epoch, self.rank, self.world = 0, 0, 1
        self.titles = self._titles() if texts else None

    def _titles(self) -> dict[str, str]:
        """doc id -> title of every title the split's negatives are drawn from: its clicked titles, and the
        titles the log skipped (``skipped/<split>.parquet``) when the features took negatives from there."""
        titles: dict[str, str] = {}
        tables = [self.store.read_table(path, columns=["doc_id", "title"]) for path in self.files]
        if self.manifest.get("negative_source", {}).get("name", "random") != "random":
            tables.append(self.store.read_table(f"{SKIPPED_ROOT}/{self.split}.parquet", columns=["doc_id", "title"]))
        for table in tables:
            titles.update(zip(table["doc_id"].to_pylist(), table["title"].to_pylist()))
        return titles

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle order of ``epoch`` (call before iterating, as with DistributedSampler)."""
        self.epoch = int(epoch)

    def shard_for_rank(self, rank: int, world: int) -> "FeatureShardDataset":
        """A view yielding rank ``rank``'s contiguous slice of every global batch (of ``batch_size`` rows).

        A last global batch with fewer than ``world`` rows is skipped on every rank, so all ranks
        yield :attr:`num_batches` batches.
        """
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} outside world of {world}")
        view = copy.copy(self)
        view.rank, view.world = rank, world
        return view

    @property
    def num_batches(self) -> int:
        """Batches per epoch (the same on every rank)."""
        full, rest = divmod(self.num_rows, self.batch_size)
        return full + int(bool(rest) and not self.drop_last and rest >= self.world)

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[PairBatch]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for index, rows in enumerate(self._global_batches()):
            if index % workers != worker or rows.num_rows < self.world:
                continue
            bounds = np.linspace(0, rows.num_rows, self.world + 1).astype(np.int64)
            mine = rows.slice(int(bounds[self.rank]), int(bounds[self.rank + 1] - bounds[self.rank]))
            yield (collate_rows(mine, self.num_negatives) if self.titles is None
                   else collate_texts(mine, self.num_negatives, self.titles))

    def _tables(self) -> Iterator[pa.Table]:
        """The split's shards in epoch order, rows shuffled within each when ``shuffle``."""
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.files)) if self.shuffle else np.arange(len(self.files))
        for k in order:
            table = self.store.read_table(self.files[int(k)], columns=FEATURE_COLUMNS if self.titles is None else TEXT_COLUMNS)
            yield table.take(pa.array(rng.permutation(table.num_rows))) if self.shuffle else table

    def _global_batches(self) -> Iterator[pa.Table]:
        """Consecutive ``batch_size`` rows across shard boundaries; the remainder last unless drop_last."""
        buffer: pa.Table | None = None
        for table in self._tables():
            buffer = table if buffer is None else pa.concat_tables([buffer, table])
            start = 0
            while buffer.num_rows - start >= self.batch_size:
                yield buffer.slice(start, self.batch_size)
                start += self.batch_size
            buffer = buffer.slice(start)
        if buffer is not None and buffer.num_rows and not self.drop_last:
            yield buffer


#: Processes that cut and pin the next batches while a GPU trains (the host must keep up with it).
LOADER_WORKERS = 4


def batches_for(dataset: "FeatureShardDataset", device: torch.device) -> Iterable[PairBatch]:
    """The dataset's batches: built in this process on CPU; on CUDA by worker processes into pinned memory,
    in the same order, so copies to the GPU overlap its work."""
    workers = max(0, min(LOADER_WORKERS, (os.cpu_count() or 1) - 1))
    if device.type != "cuda" or workers == 0:
        return dataset
    return DataLoader(dataset, batch_size=None, num_workers=workers, pin_memory=True, prefetch_factor=4)
