"""A model saved as config + vocabulary + weights: no pickle, MLflow round trip, old pickled runs still load."""
from __future__ import annotations

import copy
import importlib
import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch

from encoders.model import tracking
from encoders.model.loading import load_encoder
from encoders.model.saved_model import FILES, FORMAT_VERSION, MOVED_MODULES, is_pickled_model, load_model_dir, save_model
from encoders.model.text_encoder import TextEncoder
from encoders.towers.text_batches import texts_to_batch
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.config import Settings
from pipeline.core.errors import InputError
from pipeline.features.trigram import TrigramVocab
from pipeline.storage.store import Store

TEXTS = ["Cordless drill kit with 2 batteries and a case", "deck screws", "", "paint roller kit"]
MAX_WORDS = 4  # shorter than the first text: the saved word cut matters


@pytest.fixture()
def vocab() -> TrigramVocab:
    words = ("cordless", "drill", "kit", "with", "batteries", "deck", "screws", "paint", "roller")
    return TrigramVocab.from_counts({f"#{w}#"[i:i + 3]: 1 for w in words for i in range(len(w))})


@pytest.fixture()
def mlflow_settings(settings: Settings, mlflow_db_template: Path, tmp_path: Path) -> Settings:
    """The test settings with their own copy of an initialised MLflow SQLite database."""
    shutil.copyfile(mlflow_db_template, tmp_path / "mlflow.db")
    return settings.with_overrides(mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", device="cpu")


def _model(model_type: str, vocab: TrigramVocab, config: dict[str, Any], seed: int = 1) -> TwoTowerModel:
    """A tiny model with every weight moved off its initial value (biases included)."""
    torch.manual_seed(seed)
    model = TwoTowerModel(model_type, vocab.size, config)
    with torch.no_grad():
        for prm in model.parameters():
            prm.add_(0.3 * torch.randn_like(prm))
    return model.eval()


@torch.no_grad()
def _vectors(model: TwoTowerModel, vocab: TrigramVocab, side: str) -> np.ndarray:
    """The in-memory model's vectors of TEXTS, straight from its tower (not through TextEncoder)."""
    return model.embed(texts_to_batch(TEXTS, vocab, MAX_WORDS), side).numpy()


def _encoded(model: TwoTowerModel, vocab: TrigramVocab, side: str) -> np.ndarray:
    """The in-memory model's vectors of TEXTS through TextEncoder (its shape-stable batches), before any save."""
    assert np.allclose(TextEncoder(model, vocab, MAX_WORDS).encode(TEXTS, side), _vectors(model, vocab, side), atol=1e-6)
    return TextEncoder(model, vocab, MAX_WORDS).encode(TEXTS, side)


@contextmanager
def _classes_at_their_old_import_paths() -> Iterator[None]:
    """The tower classes named by the modules they lived in when models were pickled (``encoders.lstm``, ...)."""
    moved: list[tuple[type, str]] = []
    try:
        for old, new in MOVED_MODULES.items():
            module = importlib.import_module(new)
            sys.modules[old] = module
            for obj in vars(module).values():
                if isinstance(obj, type) and obj.__module__ == new:
                    moved.append((obj, new))
                    obj.__module__ = old
        yield
    finally:
        for cls, new in moved:
            cls.__module__ = new
        for old in MOVED_MODULES:
            sys.modules.pop(old, None)


def _log_pickled_the_old_way(model: TwoTowerModel, vocab: TrigramVocab, max_words: int | None) -> dict[str, Any]:
    """How ``tracking.log_model`` logged models before config + vocabulary + weights: a pickled module, its
    classes named by the import paths they had then."""
    import mlflow
    import mlflow.pytorch

    cpu_copy = copy.deepcopy(model).to("cpu").eval()
    cpu_copy.vocab_data, cpu_copy.max_words = vocab.to_dict(), max_words  # attached ad hoc, as the trainer did
    with _classes_at_their_old_import_paths():
        info = mlflow.pytorch.log_model(cpu_copy, name="model", serialization_format="pickle",
                                        pip_requirements=["torch==2.13.0"], registered_model_name="deepsent-lstm")
    run_id = mlflow.active_run().info.run_id
    return {"model_uri": f"runs:/{run_id}/model", "registry_uri": f"models:/deepsent-lstm/{info.registered_model_version}"}


def test_saved_folder_is_config_vocabulary_and_plain_tensors(vocab: TrigramVocab, tmp_path: Path) -> None:
    model = _model("lstm", vocab, {"ncell": 5, "forget_gate": True})
    folder = save_model(model, vocab, MAX_WORDS, tmp_path / "model", gamma=10.0)
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    config = json.loads((folder / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION and config["model_type"] == "lstm"
    assert config["towers"]["query"] == config["towers"]["doc"] == model.config and config["towers"]["doc"]["forget_gate"]
    assert (config["max_words"], config["gamma"], config["vocab_version"]) == (MAX_WORDS, 10.0, vocab.version)
    # vocab.json is byte for byte what the features write for the same vocabulary
    vocab.save(Store(str(tmp_path / "features")), "vocab.json")
    assert (folder / "vocab.json").read_bytes() == (tmp_path / "features" / "vocab.json").read_bytes()
    weights = torch.load(folder / "weights.pt", weights_only=True)  # tensors only: no pickled class can load
    assert set(weights) == set(model.state_dict()) and all(type(t) is torch.Tensor for t in weights.values())
    for name, tensor in model.state_dict().items():
        assert torch.equal(weights[name], tensor)


@pytest.mark.parametrize("model_type,config", [("lstm", {"ncell": 6, "forget_gate": True, "peepholes": True}),
                                               ("dssm", {"nhid": 8, "nout": 4})])
def test_round_trip_through_mlflow_gives_the_same_vectors(vocab: TrigramVocab, mlflow_settings: Settings,
                                                          model_type: str, config: dict[str, Any]) -> None:
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    model = _model(model_type, vocab, config)
    with tracking.run(mlflow_settings, "deepsent"):
        logged = tracking.log_model(model, vocab, MAX_WORDS, gamma=10.0)
    run_id = logged["model_uri"].split("/")[1]
    client = MlflowClient(mlflow_settings.mlflow_tracking_uri)
    version = client.get_model_version(f"deepsent-{model_type}", logged["registered_version"])
    assert version.run_id == run_id and version.source.startswith("models:/m-")  # the run's logged model
    folder = Path(download_artifacts(logged["registry_uri"]))  # a pyfunc with the saved model inside
    assert {"MLmodel", "requirements.txt", "code"} <= {p.name for p in folder.iterdir()}
    assert sorted(p.name for p in (folder / "artifacts" / "saved_model").iterdir()) == sorted(FILES)
    client.set_registered_model_alias(f"deepsent-{model_type}", "champion", logged["registered_version"])
    expected = {side: _encoded(model, vocab, side) for side in ("query", "doc")}  # the saved model: the same bytes
    for uri in (logged["model_uri"], logged["registry_uri"], f"models:/deepsent-{model_type}@champion", run_id):
        encoder = load_encoder(uri, mlflow_settings)
        assert isinstance(encoder, TextEncoder) and encoder.run_id == run_id and encoder.label == model.name
        assert encoder.max_words == MAX_WORDS and encoder.vocab.version == vocab.version
        assert encoder.model_uri == tracking.model_uri_of(uri) and encoder.device == torch.device("cpu")
        for side in ("query", "doc"):
            np.testing.assert_array_equal(encoder.encode(TEXTS, side), expected[side])


def test_old_pickled_runs_load_with_the_same_vectors(vocab: TrigramVocab, mlflow_settings: Settings) -> None:
    from mlflow.artifacts import download_artifacts

    model = _model("lstm", vocab, {"ncell": 6})
    with tracking.run(mlflow_settings, "deepsent"):
        old = _log_pickled_the_old_way(model, vocab, MAX_WORDS)
    folder = download_artifacts(old["model_uri"])
    assert is_pickled_model(folder)  # an MLmodel of the pytorch flavour, no config.json
    pickled = Path(folder, "data", "model.pth").read_bytes()
    assert b"encoders.lstm" in pickled and b"encoders.towers" not in pickled  # the classes' old import paths
    assert "encoders.lstm" not in sys.modules  # no module left at an old path: the unpickler maps them
    with tracking.run(mlflow_settings, "deepsent"):
        new = tracking.log_model(model, vocab, MAX_WORDS, register=False)
    current = load_encoder(new["model_uri"], mlflow_settings)
    for uri in (old["model_uri"], old["registry_uri"]):
        encoder = load_encoder(uri, mlflow_settings)
        assert encoder.max_words == MAX_WORDS and encoder.label == current.label
        for side in ("query", "doc"):
            np.testing.assert_array_equal(encoder.encode(TEXTS, side), current.encode(TEXTS, side))


def test_runs_that_logged_the_bare_folder_load_with_the_same_vectors(vocab: TrigramVocab,
                                                                    mlflow_settings: Settings, tmp_path: Path) -> None:
    """Runs logged between the pickle and the pyfunc: the run's ``model`` artifact is the saved folder itself."""
    import mlflow

    model = _model("dssm", vocab, {"nhid": 8, "nout": 4})
    with tracking.run(mlflow_settings, "deepsent"):
        mlflow.log_artifacts(str(save_model(model, vocab, MAX_WORDS, tmp_path / "bare")), "model")
        bare = tracking.model_uri_of(mlflow.active_run().info.run_id)
    with tracking.run(mlflow_settings, "deepsent"):
        current = load_encoder(tracking.log_model(model, vocab, MAX_WORDS, register=False)["model_uri"], mlflow_settings)
    encoder = load_encoder(bare, mlflow_settings)
    for side in ("query", "doc"):
        np.testing.assert_array_equal(encoder.encode(TEXTS, side), current.encode(TEXTS, side))


def test_a_folder_of_neither_format_or_a_newer_version_is_refused(vocab: TrigramVocab, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="neither config.json"):
        load_model_dir(tmp_path / "empty")
    folder = save_model(_model("rnn", vocab, {"nhid": 4}), vocab, None, tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(InputError, match=f"format version {FORMAT_VERSION + 1}"):
        load_model_dir(folder)


def test_the_packaged_minilm_weights_are_referenced_not_copied_and_checked_on_load(vocab: TrigramVocab,
                                                                                   tmp_path: Path) -> None:
    """An ensemble's MiniLM half is the packaged all-MiniLM-L6-v2 as installed: its tensors stay out of weights.pt
    (listed in config.json with the package's weights hash) and come back from the package, the vectors unchanged;
    a MiniLM whose weights moved (fine-tuned) is copied; a package of other weights is refused on load."""
    from encoders.towers.minilm import packaged_state

    torch.manual_seed(3)
    model = TwoTowerModel("ensemble", vocab.size, {"ncell": 5, "mix": 0.3, "max_tokens": 16}).eval()
    folder = save_model(model, vocab, MAX_WORDS, tmp_path / "ensemble")
    config, weights = json.loads((folder / "config.json").read_text()), torch.load(folder / "weights.pt", weights_only=True)
    referenced = config["packaged"]["keys"]
    assert len(referenced) == 2 * len(packaged_state())  # the query and the document tower's MiniLM
    assert set(weights) == set(model.state_dict()) - set(referenced) and all("trigram_part" not in k for k in referenced)
    assert (folder / "weights.pt").stat().st_size < 1_000_000  # the LSTM half only: 90 MB of MiniLM stay packaged
    reloaded = load_model_dir(folder).model
    for name, tensor in model.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name
    texts = ["cordless drill kit", "deck screws"]
    np.testing.assert_array_equal(TextEncoder(reloaded, vocab, MAX_WORDS).encode(texts, "doc"),
                                  TextEncoder(model, vocab, MAX_WORDS).encode(texts, "doc"))

    with torch.no_grad():  # one MiniLM weight moved, as fine-tuning moves them: that tensor is copied
        moved = next(k for k in referenced if k.startswith("query") and k.endswith("LayerNorm.weight"))
        model.state_dict()[moved].add_(0.01)
    again = json.loads((save_model(model, vocab, MAX_WORDS, tmp_path / "tuned") / "config.json").read_text())
    assert moved not in again["packaged"]["keys"] and len(again["packaged"]["keys"]) == len(referenced) - 1

    (folder / "config.json").write_text(json.dumps({**config, "packaged": {**config["packaged"], "weights_sha256": "0" * 64}}))
    with pytest.raises(InputError, match="saved with the packaged all-MiniLM-L6-v2 weights of SHA-256 000000000000"):
        load_model_dir(folder)
