"""The embedding job: every corpus title and judged query, fixed-size float32 vectors, stable re-runs."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.compute as pc
import pytest

import encoders.search.embed as embed_module
from deepsent.cli import main
from encoders.model.loading import load_encoder
from encoders.search.embed import embed, query_id
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.core.homedepot import read_judgments
from pipeline.core.schemas import embeddings_schema
from pipeline.core.store import Store


def test_embed_writes_every_title_and_query(trained_run: tuple[Settings, TrainResult], monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained = trained_run
    monkeypatch.setattr(embed_module, "CHUNK_ROWS", 20_000)  # several parts even on this small corpus
    store = Store.from_settings(settings)
    result = embed(settings, trained.registry_uri, threads=1)
    root = store.relpath(result.root)
    # expected corpus, computed independently: distinct doc ids of both judgment files and the pairs
    doc_ids = set()
    for path in (settings.train_judgments, settings.dev_judgments):
        doc_ids |= set(read_judgments(path)["doc_id"].to_pylist())
    doc_ids |= set(store.read_table("pairs", ["doc_id"])["doc_id"].to_pylist())
    dev_queries = set(read_judgments(settings.dev_judgments)["query"].to_pylist())
    titles, queries = store.read_table(f"{root}/titles"), store.read_table(f"{root}/queries")
    assert titles.schema == embeddings_schema(16) and queries.schema == embeddings_schema(16)
    assert titles.num_rows == len(doc_ids) == result.titles and set(titles["doc_id"].to_pylist()) == doc_ids
    assert queries.num_rows == len(dev_queries) and set(queries["text"].to_pylist()) == dev_queries
    assert len(store.list_files(f"{root}/titles")) == math.ceil(len(doc_ids) / 20_000)
    assert set(pc.unique(titles["kind"]).to_pylist()) == {"title"}
    assert queries["doc_id"][0].as_py() == query_id(queries["text"][0].as_py())
    # the stored vectors are the model's
    encoder = load_encoder(trained.model_uri, settings)
    sample = titles.slice(100, 50)
    stored = np.asarray(sample["vector"].to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(stored, encoder.encode(sample["text"].to_pylist(), "doc"), rtol=1e-6, atol=1e-7)
    sample = queries.slice(0, 50)
    stored = np.asarray(sample["vector"].to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(stored, encoder.encode(sample["text"].to_pylist(), "query"), rtol=1e-6, atol=1e-7)
    manifest = store.read_json(f"{root}/manifest.json")
    assert manifest["titles"]["rows"] == len(doc_ids) and sum(manifest["titles"]["sources"].values()) == len(doc_ids)
    assert manifest["run_id"] == trained.run_id and manifest["dim"] == 16
    from mlflow import MlflowClient

    metrics = MlflowClient(settings.mlflow_tracking_uri).get_run(trained.run_id).data.metrics
    assert metrics["embed_titles_per_s"] > 0
    # a re-run (here through the CLI) replaces the parts with the same bytes, no duplicates
    files = store.list_files(root)
    before = {f: store.read_bytes(f) for f in files if f.endswith(".parquet")}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    capsys.readouterr()
    assert main(["embed", "--json", "--store", settings.store, "--model-uri", trained.model_uri, "--device", "cpu",
                 "--threads", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["titles"] == len(doc_ids) and printed["root"] == result.root
    assert store.list_files(root) == files
    assert all(store.read_bytes(f) == data for f, data in before.items())
