"""MLflow: a real run is written, found by search, and its model reloads with the same embeddings."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from encoders.model.loading import load_encoder
from encoders.model.tracking import find_runs
from encoders.towers.text_batches import texts_to_batch
from encoders.towers.twotower import TwoTowerModel
from encoders.training.checkpoint import load_checkpoint
from encoders.training.results import TrainResult
from encoders.training.trainer import TrainConfig, train
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store

TEXTS = ["cordless drill 18 volt", "behr premium plus ultra paint", "", "x" * 40, "deck screws 3 in"]


def _best_model(settings: Settings, result: dict[str, Any]) -> tuple[TwoTowerModel, TrigramVocab]:
    """The best epoch's weights straight from the checkpoint, in a freshly built model."""
    store = Store.from_settings(settings)
    state = load_checkpoint(store, store.relpath(result.checkpoint))
    vocab = TrigramVocab.load(store, f"features/{result.features_version}/vocab.json")
    model = TwoTowerModel("lstm", vocab.size, {"ncell": 16})
    model.load_state_dict(state["best"]["state"])
    return model.eval(), vocab


def test_run_is_written_and_found(trained_run: tuple[Settings, TrainResult]) -> None:
    settings, result = trained_run
    runs = find_runs(settings, "params.model = 'lstm' and tags.dag_id = 'deepsent_train'")
    assert [r.info.run_id for r in runs] == [result.run_id]
    run = runs[0]
    params = run.data.params
    assert params["tower.ncell"] == "16" and params["tower.forget_gate"] == "False"
    assert params["optimizer"] == "nesterov" and params["gamma"] == "10.0" and params["negatives"] == "4"
    assert params["features_version"] == result.features_version and params["vocab_size"] == str(result.vocab_size)
    assert params["param_count"] == str(result.param_count) and params["device"].startswith("cpu")
    assert run.data.tags["airflow_run_id"] == "manual__test"
    assert run.data.metrics["examples_per_s_mean"] > 0 and run.data.metrics["param_count"] == result.param_count
    assert run.data.metrics["best_epoch"] == result.best_epoch  # counted from 1 wherever users see it
    [dataset] = [d.dataset for d in run.inputs.dataset_inputs]  # the feature set is the run's dataset input
    assert dataset.name == f"features-{result.features_version}" and dataset.source_type == "local"
    assert json.loads(dataset.source)["uri"].endswith(f"features/{result.features_version}")
    assert [t.value for t in run.inputs.dataset_inputs[0].tags if t.key == "mlflow.data.context"] == ["training"]
    from mlflow import MlflowClient

    client = MlflowClient(settings.mlflow_tracking_uri)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "valid_loss")] == [0, 1]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"cost_curve.png", "vocab.json", "history.json"} <= artifacts
    assert client.get_model_version("deepsent-lstm", str(result.registered_version)).run_id == run.info.run_id
    vocab_path = client.download_artifacts(run.info.run_id, "vocab.json")
    assert json.loads(Path(vocab_path).read_text())["version"] == params["vocab_version"]


def test_reloaded_model_gives_the_same_embeddings(trained_run: tuple[Settings, TrainResult]) -> None:
    settings, result = trained_run
    model, vocab = _best_model(settings, result)
    with torch.no_grad():
        batch = texts_to_batch(TEXTS, vocab, 30)
        expected = {side: model.embed(batch, side).numpy() for side in ("query", "doc")}
    for uri in (result.model_uri, result.registry_uri, result.run_id):
        encoder = load_encoder(uri, settings)
        assert encoder.run_id == result.run_id and encoder.label == "LSTM-RNN (ncell=16)"
        assert encoder.param_count == result.param_count and encoder.config["ncell"] == 16
        for side in ("query", "doc"):
            got = encoder.encode(TEXTS, side, batch_size=2)
            assert got.dtype == np.float32 and got.shape == (len(TEXTS), 16)
            np.testing.assert_allclose(got, expected[side], rtol=1e-6, atol=1e-7)


def test_loading_fetches_the_saved_model_not_the_code_it_carries(trained_run: tuple[Settings, TrainResult],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a tracking server each file is a request: a load fetches MLmodel and the saved model's folder only."""
    import mlflow

    settings, result = trained_run
    fetched: list[str] = []
    download = mlflow.artifacts.download_artifacts

    def recorded(artifact_uri: str, dst_path: str) -> str:
        fetched.append(artifact_uri.rsplit("/artifacts/", 1)[-1])
        return download(artifact_uri=artifact_uri, dst_path=dst_path)

    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", recorded)
    for uri in (result.model_uri, result.registry_uri):
        fetched.clear()
        assert load_encoder(uri, settings).run_id == result.run_id
        assert fetched == ["MLmodel", "saved_model"], uri


def test_unknown_model_uri_is_a_clear_error(trained_run: tuple[Settings, TrainResult]) -> None:
    settings, _ = trained_run
    with pytest.raises(DeepsentError, match="cannot load model models:/deepsent-lstm/99"):
        load_encoder("models:/deepsent-lstm/99", settings)


def test_training_on_an_s3_store(s3_settings: Settings, tiny_features_store: Path, mlflow_db_template: Path,
                                 tmp_path: Path) -> None:
    import shutil

    db = tmp_path / "s3run.db"
    shutil.copyfile(mlflow_db_template, db)
    settings = s3_settings.with_overrides(mlflow_tracking_uri=f"sqlite:///{db}", device="cpu")
    store = Store.from_settings(settings)
    for path in sorted(tiny_features_store.joinpath("features").rglob("*")):
        if path.is_file():
            store.put_file(str(path.relative_to(tiny_features_store)), path)
    result = train(settings, TrainConfig(model="dssm", tower={"nhid": 16, "nout": 8}, epochs=1, batch_size=64,
                                         threads=1))
    assert result.checkpoint.endswith(f"/{result.run_id}/last.pt")  # keyed by config, then by run
    assert store.exists(store.relpath(result.checkpoint))
    encoder = load_encoder(result.model_uri, settings)  # artifacts come back from the S3 endpoint
    assert encoder.encode(TEXTS, "doc").shape == (len(TEXTS), 8)
    from mlflow import MlflowClient

    run = MlflowClient(settings.mlflow_tracking_uri).get_run(result.run_id)
    assert run.info.artifact_uri.startswith(settings.store + "/mlartifacts")
