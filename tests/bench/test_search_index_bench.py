"""The search benchmark runs end to end at a tiny size and reports what it measured."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bench.search.index as bench
from bench.search.index import main, tuning_queries
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from tests.conftest import private_copy


def test_benchmark_measures_every_index_at_each_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSENT_STORE", raising=False)  # random vectors
    monkeypatch.delenv("DEEPSENT_BENCH_MODEL_URI", raising=False)
    out = tmp_path / "search.json"
    assert main(["--base", "1500", "--sizes", "real", "4000", "--queries", "200", "--single", "50", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["source"].startswith("random unit vectors") and [r["vectors"] for r in results["runs"]] == [1500, 4000]
    assert results["model_uri"] is None
    for run in results["runs"]:
        indexes = run["indexes"]
        assert [indexes[k]["type"] for k in ("exact", "ivf", "hnsw")] == ["IndexFlatIP", "IndexIVFScalarQuantizer", "IndexHNSWFlat"]
        assert indexes["exact"]["recall_at_10"] == {"perturbed": 1.0}  # exact search is its own truth
        assert run["goal_on"] == "perturbed" and "tuned_on" not in indexes["exact"]
        assert indexes["ivf"]["tuned_on"] == "held-out titles" and indexes["hnsw"]["tuned_on"] == "perturbed titles"
        assert indexes["ivf"]["params"]["tune_queries"] == indexes["hnsw"]["params"]["tune_queries"] == 1000
        for name in ("ivf", "hnsw"):
            assert 0.5 < indexes[name]["recall_at_10"]["perturbed"] <= 1.0
            latency = indexes[name]["single"]
            assert latency["calls"] == 50 and 0 < latency["p50_ms"] <= latency["p99_ms"]
            assert indexes[name]["single_on"] == "perturbed"
            expected = latency["p99_ms"] < 10 and indexes[name]["recall_at_10"]["perturbed"] >= 0.95
            assert run["goal"][name] == expected
        assert indexes["hnsw"]["params"]["tune_recall_at_10"] >= 0.95 or indexes["hnsw"]["params"]["efSearch"] == 4096
        assert indexes["exact"]["batch_100"]["calls"] == 2 and indexes["exact"]["index_mib"] > 0
        # a flat index stores dim float32 per vector and little else
        assert 4 * run["dim"] <= indexes["exact"]["bytes_per_vector"] < 4 * run["dim"] + 8
        assert indexes["hnsw"]["bytes_per_vector"] > indexes["exact"]["bytes_per_vector"]  # plus the graph's links


def test_tuning_queries_are_the_training_queries_as_unit_rows_else_titles() -> None:
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((500, 8)).astype(np.float32)
    training = 3 * rng.standard_normal((40, 8)).astype(np.float32)
    tune = tuning_queries(corpus, training, 0.1, seed=4)
    for name in ("ivf", "hnsw"):
        vectors, label = tune[name]
        assert label == "training click queries (40)" and vectors.shape == (40, 8)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(vectors, training / np.linalg.norm(training, axis=1, keepdims=True), rtol=1e-5)
    fallback = tuning_queries(corpus, None, 0.1, seed=4)
    assert fallback["ivf"] == (None, "held-out titles") and fallback["hnsw"][1] == "perturbed titles"
    assert fallback["hnsw"][0].shape == (1000, 8)


def test_with_a_model_both_indexes_tune_on_its_training_queries_and_goal_is_judged_on_real_queries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    titles = rng.standard_normal((1500, 16)).astype(np.float32)
    titles /= np.linalg.norm(titles, axis=1, keepdims=True)
    real = rng.standard_normal((30, 16)).astype(np.float32)  # 30 judged queries (fewer than --single), far from any title
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    training = titles[100:400] + 0.05 * rng.standard_normal((300, 16)).astype(np.float32)
    seen: list[str] = []
    monkeypatch.setenv("DEEPSENT_STORE", str(tmp_path))
    monkeypatch.setattr(bench, "training_vectors", lambda uri: (seen.append(uri), training)[1])
    monkeypatch.setattr(bench, "stored_vectors", lambda uri: (titles, real, f"store of {uri}"))
    timed, latencies_ms = [], bench.latencies_ms
    monkeypatch.setattr(bench, "latencies_ms", lambda index, q, batch, threads: (timed.append((batch, q)),
                                                                                 latencies_ms(index, q, batch, threads))[1])
    out = tmp_path / "search.json"
    assert main(["--model-uri", "runs:/run1/model", "--sizes", "real", "--indexes", "ivf", "hnsw", "--queries", "200",
                 "--single", "50", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert seen == ["runs:/run1/model"] and results["model_uri"] == "runs:/run1/model" and results["source"] == "store of runs:/run1/model"
    (run,) = results["runs"]
    assert run["goal_on"] == "real_queries" and run["query_sets"] == {"perturbed": 200, "real_queries": 30}
    for name in ("ivf", "hnsw"):
        entry = run["indexes"][name]
        assert entry["tuned_on"] == "training click queries (300)" and entry["params"]["tune_queries"] == 300
        assert entry["single_on"] == "real_queries" and entry["single"]["calls"] == 50  # the 30 cycled
        expected = entry["single"]["p99_ms"] < 10 and entry["recall_at_10"]["real_queries"] >= 0.95
        assert run["goal"][name] == expected
    singles = [q for batch, q in timed if batch == 1]  # the 30 real queries, cycled to 50 calls
    assert len(singles) == 2 and all(np.array_equal(q, real[np.arange(50) % 30]) for q in singles)
    hnsw = run["indexes"]["hnsw"]["recall_at_10"]  # easy perturbed queries, hard real ones: the goal must follow the real ones
    assert hnsw["perturbed"] >= 0.95 > hnsw["real_queries"] and run["goal"]["hnsw"] is False


def test_model_uri_needs_a_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSENT_STORE", raising=False)
    with pytest.raises(SystemExit):
        main(["--model-uri", "runs:/x/model", "--sizes", "real"])


def test_stored_vectors_are_the_vector_stores_of_the_model_or_none_without_a_champion(
        trained_run: tuple[Settings, TrainResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from encoders.model.loading import load_encoder
    from encoders.model.vector_store import StoredEncoder
    from encoders.search.corpus_shards import corpus_texts
    from encoders.search.embed import judged_queries
    from pipeline.ingest.catalog.corpus import corpus_titles
    from encoders.search.vectors import unit
    from pipeline.storage.store import Store

    shared, trained = trained_run
    settings = private_copy(shared, tmp_path)
    for name, value in (("DEEPSENT_STORE", settings.store), ("DEEPSENT_DATA_DIR", str(settings.data_dir)),
                        ("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri), ("DEEPSENT_DEVICE", "cpu")):
        monkeypatch.setenv(name, value)
    store = Store.from_settings(settings)
    assert bench.stored_vectors(None) is None  # no champion in this registry: random vectors
    encoder = StoredEncoder(load_encoder(trained.model_uri, settings), store)
    texts = corpus_texts(settings, store)
    titles = encoder.encode(texts, "doc")  # what the chain's encode stage stores
    queries = encoder.encode(judged_queries([settings.dev_judgments]), "query")
    parts = store.list_files("vectors")
    got_titles, got_queries, source = bench.stored_vectors(trained.model_uri)
    assert store.list_files("vectors") == parts  # read, nothing encoded again
    stored = dict(zip(texts, titles))  # one row per product of the corpus, as deepsent index reads them
    np.testing.assert_array_equal(got_titles, unit(np.stack([stored[t] for _, t in corpus_titles(settings, store)[0]])))
    np.testing.assert_array_equal(got_queries, unit(queries))
    assert source == f"{store.uri('vectors')} of {trained.model_uri} (run {trained.run_id})"
