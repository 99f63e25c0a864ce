"""Feature shards through FeatureShardDataset: exact ids back, seeded order, rank shares, texts -> batches."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import torch
from torch.utils.data import DataLoader

from bench.stages.featurize import write_judged_pairs
from encoders.towers.batch import PairBatch, SentenceBatch
from encoders.towers.text_batches import texts_to_batch
from encoders.training.data import FeatureShardDataset
from pipeline.core.config import Settings
from pipeline.features.featurize import featurize
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store

NEGATIVES = 3


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Store, str]:
    """Features of 300 real judged queries in shards of 250 pairs."""
    settings = Settings.from_env(store=str(tmp_path_factory.mktemp("store")), data_dir=str(data_dir), dask_workers=1)
    store = Store.from_settings(settings)
    write_judged_pairs(store, settings, max_queries=300)
    return store, featurize(settings, negatives=NEGATIVES, shard_rows=250).version


def _sentences(batch: SentenceBatch) -> list[tuple[list[list[int]], list[list[int]]]]:
    """Back from the flat EmbeddingBag layout to (ids per word, counts per word) per sentence."""
    ends = batch.offsets.tolist()[1:] + [batch.ids.shape[0]]
    words = [(batch.ids[s:e].tolist(), [int(c) for c in batch.weights[s:e].tolist()]) for s, e in zip(batch.offsets.tolist(), ends)]
    out, at = [], 0
    for n in batch.lengths.tolist():
        out.append(([w[0] for w in words[at : at + n]], [w[1] for w in words[at : at + n]]))
        at += n
    return out


def _rows(store: Store, version: str, split: str) -> pa.Table:
    return store.read_table(f"features/{version}/{split}")


def test_shards_round_trip_exactly_through_the_dataset(features: tuple[Store, str]) -> None:
    store, version = features
    ds = FeatureShardDataset(store, version, "train", batch_size=64, shuffle=False)
    batches = list(ds)
    table = _rows(store, version, "train")
    assert len(batches) == ds.num_batches == len(ds) == -(-table.num_rows // 64)
    assert sum(b.size for b in batches) == ds.num_rows == table.num_rows
    assert all(b.num_negatives == NEGATIVES and b.docs.num_sentences == b.size * (1 + NEGATIVES) for b in batches)
    queries = [s for b in batches for s in _sentences(b.query)]
    docs = [s for b in batches for s in _sentences(b.docs)]
    assert queries == list(zip(table["q_ids"].to_pylist(), table["q_counts"].to_pylist()))
    stored_docs = [d for ids, counts in zip(table["d_ids"].to_pylist(), table["d_counts"].to_pylist()) for d in zip(ids, counts)]
    assert docs == stored_docs
    assert max(int(b.docs.ids.max()) for b in batches) < ds.vocab_size


def test_order_is_seeded_per_epoch_and_covers_every_row(features: tuple[Store, str]) -> None:
    store, version = features
    def order(epoch: int, seed: int = 7) -> list:
        ds = FeatureShardDataset(store, version, "train", batch_size=100, shuffle=True, seed=seed)
        ds.set_epoch(epoch)
        return [s for b in ds for s in _sentences(b.query)]
    plain = [s for b in FeatureShardDataset(store, version, "train", batch_size=100, shuffle=False) for s in _sentences(b.query)]
    first = order(0)
    assert first == order(0)
    assert first != order(1) and first != order(0, seed=8) and first != plain
    assert sorted(map(str, first)) == sorted(map(str, order(1))) == sorted(map(str, plain))


def test_rank_shares_split_every_global_batch(features: tuple[Store, str]) -> None:
    store, version = features
    full = FeatureShardDataset(store, version, "train", batch_size=33, shuffle=True, seed=3)
    ranks = [full.shard_for_rank(r, 2) for r in range(2)]
    assert ranks[0].num_batches == ranks[1].num_batches == full.num_batches
    for whole, part0, part1 in zip(full, ranks[0], ranks[1], strict=True):
        assert (part0.size, part1.size) == (16, 17) or whole.size < 33
        assert _sentences(whole.query) == _sentences(part0.query) + _sentences(part1.query)
    with pytest.raises(ValueError):
        full.shard_for_rank(2, 2)


def test_drop_last_and_a_dataloader_with_workers_keep_the_order(features: tuple[Store, str]) -> None:
    store, version = features
    ds = FeatureShardDataset(store, version, "valid", batch_size=16, shuffle=True, seed=1, drop_last=True)
    direct = list(ds)
    assert len(direct) == ds.num_batches == ds.num_rows // 16 and all(b.size == 16 for b in direct)
    loaded = list(DataLoader(ds, batch_size=None, num_workers=2))
    assert len(loaded) == len(direct)
    assert all(isinstance(b, PairBatch) and torch.equal(a.docs.ids, b.docs.ids) for a, b in zip(direct, loaded))


def test_texts_to_batch_matches_the_vocabulary(features: tuple[Store, str]) -> None:
    store, version = features
    vocab = TrigramVocab.load(store, f"features/{version}/vocab.json")
    texts = ["Cordless DRILL 18v", "", "3/4 in. copper pipe fittings for the kitchen sink", "qqqzzz"]
    batch = texts_to_batch(texts, vocab, max_words=5)
    expected = [vocab.encode(t, 5) for t in texts]
    expected[1] = ([[0]], [[1]])  # an empty text is one unknown word
    assert _sentences(batch) == [tuple(e) for e in expected]
    assert batch.lengths.tolist() == [3, 1, 5, 1] and batch.ids.dtype == torch.int64 and batch.weights.dtype == torch.float32
    bag = torch.nn.EmbeddingBag(vocab.size, 4, mode="sum")
    assert bag(batch.ids, batch.offsets, per_sample_weights=batch.weights).shape == (10, 4)
