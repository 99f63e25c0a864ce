"""``featurize``: the shard contract, manifest, quarantine, idempotent re-runs, the S3 store and the CLI."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.stages.featurize import judged_pairs, write_judged_pairs
from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.features.feature_files import latest_version, read_manifest
from pipeline.features.featurize import ShardContext, featurize, plan_shards, run_shards
from pipeline.features.negatives import TitlePool
from pipeline.features.text_arrays import word_counts
from pipeline.features.trigram import TrigramVocab
from pipeline.runtime.dask_cluster import dask_client
from pipeline.storage.schemas import FEATURES_SCHEMA, PAIRS_SCHEMA
from pipeline.storage.store import Store

QUERIES = 500


def test_featurize_writes_the_shard_contract(settings: Settings, store: Store) -> None:
    rows = write_judged_pairs(store, settings, max_queries=QUERIES)
    result = featurize(settings, negatives=4, max_words=8, shard_rows=1000)
    version = result.version
    assert latest_version(store) == version
    manifest = read_manifest(store)
    assert manifest["params"] == {"negatives": 4, "min_count": 1, "max_words": 8, "seed": 7, "shard_rows": 1000}
    vocab = TrigramVocab.load(store, manifest["vocab"]["path"])
    assert (vocab.version, vocab.size) == (manifest["vocab"]["version"], result.vocab_size)
    assert 0 < manifest["oov"]["dev"]["oov_share"] < 0.2 and manifest["oov"]["dev"]["file"] == "judgments_dev.csv"
    for split in ("train", "valid"):
        counts = manifest["splits"][split]
        assert counts["rows_in"] == rows[split] == counts["rows_out"] + counts["rows_quarantined"]
        files = store.list_files(f"features/{version}/{split}")
        assert files == [s["path"] for s in counts["shards"]]
        assert files[0].endswith("part-00000.parquet")
        table = store.read_table(f"features/{version}/{split}")
        assert table.schema.equals(FEATURES_SCHEMA) and table.num_rows == counts["rows_out"]
        assert sorted(table["pair_id"].to_pylist()) == list(range(rows[split]))
        assert table["q_ids"].to_pylist() == [vocab.encode(q, 8)[0] for q in table["query"].to_pylist()]
        assert table["q_counts"].to_pylist() == [vocab.encode(q, 8)[1] for q in table["query"].to_pylist()]
        clicked = [d[0] for d in table["d_counts"].to_pylist()]
        assert clicked == [vocab.encode(t, 8)[1] for t in table["title"].to_pylist()]
        assert set(pc.list_value_length(table["neg_doc_ids"]).to_pylist()) == {4}
        titles = store.read_table(f"pairs/{split}.parquet")
        long_titles = sum(len(t.split()) > 8 for t in titles["title"].to_pylist())
        assert counts["truncated"]["doc_sentences"] >= long_titles > 0  # negatives add their own cuts
    assert len(result.uris["train"]) == len(manifest["splits"]["train"]["shards"]) >= 3


def test_shards_are_the_fewest_equal_parts_of_at_most_shard_rows(settings: Settings) -> None:
    train = judged_pairs(settings, max_queries=QUERIES)["train"]
    train = train.append_column("pair_id", pa.array(np.arange(train.num_rows, dtype=np.int64)))
    for shard_rows in (1, 7, train.num_rows // 3, train.num_rows // 3 + 1, train.num_rows, train.num_rows + 5):
        sizes = [job.rows.num_rows for job in plan_shards("train", train, 7, shard_rows)]
        assert len(sizes) == -(-train.num_rows // shard_rows) and max(sizes) <= shard_rows, shard_rows
        assert sum(sizes) == train.num_rows and max(sizes) - min(sizes) <= 1, sizes
    jobs = plan_shards("train", train, 7, train.num_rows // 5)
    assert sorted(pa.concat_tables([j.rows for j in jobs])["pair_id"].to_pylist()) == list(range(train.num_rows))
    assert plan_shards("train", train.slice(0, 0), 7, 10) == []


def test_rerun_gives_the_same_bytes_and_no_leftovers(settings: Settings, store: Store) -> None:
    write_judged_pairs(store, settings, max_queries=200)
    version = featurize(settings, shard_rows=300).version
    before = {p: store.read_bytes(p) for p in store.list_files("features")}
    store.write_bytes(f"features/{version}/train/part-00099.parquet", b"stale")
    assert featurize(settings, shard_rows=300).version == version
    assert {p: store.read_bytes(p) for p in store.list_files("features")} == before
    assert featurize(settings, shard_rows=300, seed=8).version != version


def test_bad_rows_are_quarantined_with_file_row_and_reason(settings: Settings, store: Store) -> None:
    pairs = judged_pairs(settings, max_queries=100)
    good = pairs["train"].to_pylist()
    bad = [
        {**good[0], "query": ""},
        {**good[1], "title": "Drill  Bit"},
        {**good[2], "split": "valid"},
        {**good[3], "doc_id": None},
    ]
    store.write_table("pairs/train.parquet", pa.Table.from_pylist(good[:10] + bad + good[10:], schema=PAIRS_SCHEMA))
    store.write_table("pairs/valid.parquet", pairs["valid"])
    result = featurize(settings, negatives=2)
    counts = result.counts["train"]
    assert (counts["rows_in"], counts["rows_out"], counts["rows_quarantined"]) == (len(good) + 4, len(good), 4)
    quarantine = store.read_table(result.uris["quarantine"])
    assert quarantine["source_file"].to_pylist() == ["pairs/train.parquet"] * 4
    assert quarantine["source_line"].to_pylist() == [11, 12, 13, 14]
    assert quarantine["reason"].to_pylist() == [
        "empty query", "title is not normalised text", "split is not 'train'", "empty doc_id",
    ]
    assert json.loads(quarantine["raw"][1].as_py())["title"] == "Drill  Bit"


def test_missing_pairs_and_missing_columns_name_the_file(settings: Settings, store: Store) -> None:
    with pytest.raises(InputError, match=r"pairs/train\.parquet: no pairs found"):
        featurize(settings)
    store.write_table("pairs/train.parquet", pa.table({"query": ["a"], "doc_id": ["1"]}))
    store.write_table("pairs/valid.parquet", pa.table({"query": ["a"], "doc_id": ["1"]}))
    with pytest.raises(InputError, match=r"pairs/train\.parquet: missing column\(s\) \['title'\]"):
        featurize(settings)


def test_too_many_negatives_for_the_pool_names_the_row(settings: Settings, store: Store) -> None:
    tiny = pa.table({"query": ["q", "q", "r"], "doc_id": ["1", "2", "3"], "title": ["a", "b", "c"],
                     "clicks": [1, 1, 1], "impressions": [1, 1, 1], "split": ["train"] * 3}, schema=PAIRS_SCHEMA)
    store.write_table("pairs/train.parquet", tiny)
    store.write_table("pairs/valid.parquet", tiny.slice(0, 0))
    with pytest.raises(InputError, match=r"train\.parquet, row 1: cannot draw 2 negatives"):
        featurize(settings, negatives=2)


def test_features_on_the_s3_store_match_the_local_store(settings: Settings, store: Store, s3_settings: Settings) -> None:
    write_judged_pairs(store, settings, max_queries=150)
    s3 = Store.from_settings(s3_settings)
    write_judged_pairs(s3, s3_settings, max_queries=150)
    local, remote = featurize(settings, shard_rows=400), featurize(s3_settings, shard_rows=400)
    assert remote.version == local.version and remote.uris["manifest"].startswith("s3://")
    assert latest_version(s3) == local.version
    files = store.list_files(f"features/{local.version}")
    assert s3.list_files(f"features/{local.version}") == files
    assert all(s3.read_bytes(f) == store.read_bytes(f) for f in files)


def test_cli_prints_one_json_object(settings: Settings, store: Store, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    write_judged_pairs(store, settings, max_queries=100)
    monkeypatch.setenv("DEEPSENT_DASK_WORKERS", "1")
    assert main(["featurize", "--json", "--store", settings.store, "--negatives", "6", "--max-words", "12"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["version"] == latest_version(store) and out["counts"]["train"]["rows_quarantined"] == 0
    assert read_manifest(store)["params"]["negatives"] == 6
    assert main(["featurize", "--store", settings.store]) == 0
    assert "OOV trigram share on dev" in capsys.readouterr().out


def test_shard_rows_reach_the_workers_outside_the_task_graph(settings: Settings) -> None:
    train = judged_pairs(settings, max_queries=2000)["train"].select(["query", "doc_id", "title"])
    # more than 10 MiB of rows: inside the task graph, Dask would warn "Sending large graph of size ..."
    table = pa.concat_tables([train] * -(-12 * 2**20 // train.nbytes))
    table = table.append_column("pair_id", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    jobs = plan_shards("train", table, 7, 4096)
    vocab = TrigramVocab.from_word_counts(word_counts([train["query"].combine_chunks(), train["title"].combine_chunks()]))
    ctx = ShardContext(vocab, {"train": TitlePool.build(train, train)}, 1, 30, 7)
    with dask_client(settings.with_overrides(dask_workers=2, dask_address="")) as client, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = sorted((r.index, r.stats["rows"]) for r in run_shards(client, jobs, ctx))
    assert done == [(job.index, job.rows.num_rows) for job in jobs]
    assert not [w for w in caught if "large graph" in str(w.message)], [str(w.message) for w in caught]


def test_a_degenerate_vocabulary_is_refused_and_never_latest(settings: Settings, store: Store,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write_judged_pairs(store, settings, max_queries=100)
    monkeypatch.setenv("DEEPSENT_DASK_WORKERS", "1")
    good = featurize(settings).version
    versions = store.list_dirs("features")
    assert main(["featurize", "--store", settings.store, "--min-count", "1000000000"]) == 2
    err = capsys.readouterr().err
    assert "--min-count 1000000000 leaves a vocabulary of 1 letter-trigram id(s) (fewer than 100)" in err
    assert len(err.splitlines()) == 1 and latest_version(store) == good and store.list_dirs("features") == versions


def test_damaged_features_are_one_line_naming_the_file_and_the_rebuild(settings: Settings, store: Store) -> None:
    from encoders.training.data import FeatureShardDataset
    from pipeline.storage.artifacts import ArtifactError

    write_judged_pairs(store, settings, max_queries=150)
    version = featurize(settings, shard_rows=400).version
    shard = store.local_path(f"features/{version}/train/part-00001.parquet")
    original = shard.read_bytes()
    assert FeatureShardDataset(store, version).num_rows > 0
    for damage, reason in ((original[: len(original) // 2], "bytes where"),
                           (original[:-8] + b"\0" * 8, "its checksum differs")):
        shard.write_bytes(damage)
        with pytest.raises(ArtifactError, match=rf"part-00001\.parquet: .*{reason}.*rebuild it with `deepsent featurize`"):
            FeatureShardDataset(store, version)
    shard.unlink()
    with pytest.raises(ArtifactError, match=r"part-00001\.parquet: missing"):
        FeatureShardDataset(store, version)
    store.local_path(f"features/{version}/manifest.json").write_text("{\"version\": ")
    with pytest.raises(ArtifactError, match=r"manifest\.json: not a readable manifest \(JSONDecodeError\)"):
        read_manifest(store, version)
