"""Fixtures of the encoder tests: random word-hashed sentences, a tiny real feature set, MLflow."""
from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch

from encoders.batch import PairBatch, Sentence, SentenceBatch
from pipeline.config import Settings
from pipeline.store import Store

torch.set_num_threads(1)


def random_sentence(rng: random.Random, vocab_size: int, words: int) -> Sentence:
    """A sentence of ``words`` words, each 1-6 distinct trigram ids with counts 1-2."""
    ids = [rng.sample(range(vocab_size), rng.randint(1, 6)) for _ in range(words)]
    return ids, [[rng.randint(1, 2) for _ in w] for w in ids]


@pytest.fixture()
def make_sentences() -> Callable[..., list[Sentence]]:
    """``make_sentences(n, vocab_size, max_words, seed)`` -> n random sentences of 1..max_words words."""

    def make(n: int, vocab_size: int = 50, max_words: int = 7, seed: int = 0) -> list[Sentence]:
        rng = random.Random(seed)
        return [random_sentence(rng, vocab_size, rng.randint(1, max_words)) for _ in range(n)]

    return make


@pytest.fixture()
def make_pairs(make_sentences: Callable[..., list[Sentence]]) -> Callable[..., PairBatch]:
    """``make_pairs(b, negatives, vocab_size, seed)`` -> a PairBatch of random queries and titles."""

    def make(b: int, negatives: int = 4, vocab_size: int = 50, seed: int = 0) -> PairBatch:
        queries = SentenceBatch.from_sentences(make_sentences(b, vocab_size, 4, seed))
        docs = SentenceBatch.from_sentences(make_sentences(b * (1 + negatives), vocab_size, 9, seed + 1))
        return PairBatch(queries, docs, negatives)

    return make


# ---- a tiny real feature set (featurised once per session) and a ready MLflow database ----------

@pytest.fixture(scope="session")
def tiny_features_store(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A store with ~400 clicked pairs of judgments_train.csv featurised with n = 4 (real featurizer)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.featurize import featurize
    from pipeline.homedepot import read_judgments
    from pipeline.pairs import query_split
    from pipeline.schemas import PAIRS_SCHEMA

    root = tmp_path_factory.mktemp("features-store")
    settings = Settings.from_env(store=str(root), data_dir=str(data_dir), dask_workers=1,
                                 mlflow_tracking_uri=f"sqlite:///{root / 'unused.db'}")
    judged = read_judgments(settings.train_judgments)
    clicked = judged.filter(pc.greater_equal(judged["relevance"], 2.5))
    queries = sorted(set(clicked["query"].to_pylist()))[:160]
    rows = clicked.filter(pc.is_in(clicked["query"], pa.array(queries))).sort_by([("query", "ascending"), ("doc_id", "ascending")])
    split = query_split(rows["query"].to_pylist(), 0.2, seed=7)
    pairs = pa.table({"query": rows["query"], "doc_id": rows["doc_id"], "title": rows["title"],
                      "clicks": pa.array([1] * rows.num_rows, pa.int64()),
                      "impressions": pa.array([1] * rows.num_rows, pa.int64()),
                      "split": pa.array(split, pa.string())}, schema=PAIRS_SCHEMA)
    store = Store.from_settings(settings)
    for name in ("train", "valid"):
        store.write_table(f"pairs/{name}.parquet", pairs.filter(pc.equal(pairs["split"], name)))
    featurize(settings, negatives=4, shard_rows=128)
    return root


@pytest.fixture(scope="session")
def mlflow_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised (empty) MLflow SQLite database; tests get a copy (migrations run once)."""
    import mlflow
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    mlflow.set_tracking_uri(None)
    return path


@pytest.fixture()
def make_train_settings(tmp_path: Path, data_dir: Path, tiny_features_store: Path, mlflow_db_template: Path,
                        monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Settings]:
    """``make_train_settings(name)``: a fresh store holding the tiny features, with its own MLflow database."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def make(name: str = "run") -> Settings:
        store = tmp_path / name / "store"
        shutil.copytree(tiny_features_store / "features", store / "features")
        shutil.copytree(tiny_features_store / "pairs", store / "pairs")
        db = tmp_path / name / "mlflow.db"
        shutil.copyfile(mlflow_db_template, db)
        return Settings.from_env(store=str(store), data_dir=str(data_dir), dask_workers=1,
                                 mlflow_tracking_uri=f"sqlite:///{db}", device="cpu")

    return make


@pytest.fixture()
def train_settings(make_train_settings: Callable[[str], Settings]) -> Settings:
    """One fresh training store with the tiny features and an empty MLflow database."""
    return make_train_settings("run")


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, tiny_features_store: Path,
                mlflow_db_template: Path) -> tuple[Settings, dict]:
    """One small LSTM trained for 2 epochs on the tiny features (settings, train() result), shared read-mostly."""
    from encoders.trainer import TrainConfig, train

    root = tmp_path_factory.mktemp("trained")
    shutil.copytree(tiny_features_store / "features", root / "store" / "features")
    shutil.copytree(tiny_features_store / "pairs", root / "store" / "pairs")
    shutil.copyfile(mlflow_db_template, root / "mlflow.db")
    settings = Settings(store=str(root / "store"), data_dir=data_dir, mlflow_tracking_uri=f"sqlite:///{root / 'mlflow.db'}",
                        dask_workers=1, device="cpu")
    config = TrainConfig(model="lstm", tower={"ncell": 16}, epochs=2, batch_size=32, seed=5, device="cpu", threads=1)
    return settings, train(settings, config, tags={"dag_id": "deepsent_train", "airflow_run_id": "manual__test"})
