"""deepsent embed: an export of the vector store, every corpus title and judged query, atomic, nothing encoded twice."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import encoders.search.embed as embed_module
from deepsent.cli import main
from encoders.model.loading import load_encoder
from encoders.model.vector_store import StoredEncoder
from encoders.search.embed import embed, query_id
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.storage.schemas import export_schema
from pipeline.storage.store import Store
from pipeline.text.homedepot import read_judgments
from tests.conftest import private_copy


def _vectors(table: object) -> np.ndarray:
    return np.asarray(table["vector"].to_pylist(), dtype=np.float32)  # type: ignore[index]


def test_embed_exports_the_vector_store_of_every_title_and_query(
        trained_run: tuple[Settings, TrainResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    shared, trained = trained_run
    settings = private_copy(shared, tmp_path)  # an empty vector store: every text is encoded by the first export
    monkeypatch.setattr(embed_module, "CHUNK_ROWS", 20_000)  # several calls to the store, each a part
    store, out = Store.from_settings(settings), tmp_path / "exported"
    result = embed(settings, trained.registry_uri, out, threads=1)
    # expected corpus, computed independently: distinct doc ids of both judgment files and the pairs
    doc_ids = set()
    for path in (settings.train_judgments, settings.dev_judgments):
        doc_ids |= set(read_judgments(path)["doc_id"].to_pylist())
    doc_ids |= set(store.read_table("pairs", ["doc_id"])["doc_id"].to_pylist())
    dev_queries = set(read_judgments(settings.dev_judgments)["query"].to_pylist())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "mlflow.db", "store"]  # no temporary folder left
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "queries.parquet", "titles.parquet"]
    titles, queries = pq.read_table(out / "titles.parquet"), pq.read_table(out / "queries.parquet")
    assert titles.schema == export_schema(16) and queries.schema == export_schema(16)
    assert titles.num_rows == len(doc_ids) == result.titles and set(titles["id"].to_pylist()) == doc_ids
    assert queries.num_rows == len(dev_queries) == result.queries and set(queries["text"].to_pylist()) == dev_queries
    assert queries["id"][0].as_py() == query_id(queries["text"][0].as_py())
    distinct = {"titles": len(set(titles["text"].to_pylist())), "queries": len(dev_queries)}
    assert result.encoded == distinct and result.from_store == {"titles": 0, "queries": 0}
    assert len(store.list_files("vectors", ".parquet")) >= 3  # titles in two calls, the queries in one
    # the exported vectors are the vector store's, byte for byte, and the model's
    stored = StoredEncoder(load_encoder(trained.model_uri, settings), store)
    for table, side in ((titles, "doc"), (queries, "query")):
        sample = table.slice(0, 50)
        assert np.array_equal(_vectors(sample), stored.encode(sample["text"].to_pylist(), side))
        np.testing.assert_allclose(_vectors(sample), stored.encoder.encode(sample["text"].to_pylist(), side),
                                   rtol=1e-6, atol=1e-7)
    assert not stored.encoded  # all read from the store
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["written_by"] == "deepsent embed" and manifest["run_id"] == trained.run_id and manifest["dim"] == 16
    assert manifest["titles"]["rows"] == len(doc_ids) and sum(manifest["titles"]["sources"].values()) == len(doc_ids)
    assert sorted(manifest["files"]) == ["queries.parquet", "titles.parquet"]
    for name, facts in manifest["files"].items():
        data = (out / name).read_bytes()
        assert facts == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    from mlflow import MlflowClient

    assert MlflowClient(settings.mlflow_tracking_uri).get_run(trained.run_id).data.metrics["embed_titles_per_s"] > 0
    # a second export (here through the CLI, over the first) encodes nothing new and writes the same bytes
    parts = store.list_files("vectors")
    before = {name: (out / name).read_bytes() for name in ("titles.parquet", "queries.parquet")}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    capsys.readouterr()
    assert main(["embed", "--json", "--store", settings.store, "--model-uri", trained.model_uri, "--out", str(out),
                 "--device", "cpu", "--threads", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["encoded"] == {"titles": 0, "queries": 0} and printed["from_store"] == distinct
    assert printed["out"] == str(out) and printed["titles"] == len(doc_ids)
    assert store.list_files("vectors") == parts
    assert all((out / name).read_bytes() == data for name, data in before.items())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "mlflow.db", "store"]


def test_embed_refuses_an_out_that_is_a_file_or_another_folder_in_one_line(
        trained_copy: tuple[Settings, TrainResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained = trained_copy
    a_file, a_folder = tmp_path / "notes.txt", tmp_path / "mine"
    a_file.write_text("keep me\n")
    a_folder.mkdir()
    (a_folder / "data.csv").write_text("keep me too\n")
    for out, reason in ((a_file, "a file is there; name a folder for the export"),
                        (a_file / "sub", "cannot make its folder"),
                        (a_folder, "a folder that is not a deepsent embed export is there; name a new or empty folder")):
        capsys.readouterr()
        assert main(["embed", "--store", settings.store, "--model-uri", trained.model_uri, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"deepsent: error: --out {out}") and reason in err and len(err.splitlines()) == 1, err
    assert a_file.read_text() == "keep me\n" and [p.name for p in a_folder.iterdir()] == ["data.csv"]
    assert not Path(settings.store, "vectors").exists()  # refused before anything was encoded
