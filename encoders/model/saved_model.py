"""A two-tower model on disk as config + vocabulary + weights, rebuilt from the tower registry.

A saved model is a folder of three files, with no pickled classes (the sentence-transformers
way), so renaming or moving a class never breaks a saved model:

* ``config.json``: format and version, the tower type as registered in ``encoders.towers.tower_classes``,
  the full config of the query and the document tower, the vector size, the vocabulary's size
  and version, ``max_words`` (the word cut of the features) and the training ``gamma``;
* ``vocab.json``: the :class:`~pipeline.features.trigram.TrigramVocab` exactly as the features save it;
* ``weights.pt``: ``torch.save`` of the state dict's tensors only, read back with
  ``torch.load(weights_only=True)``; tensors that are the packaged all-MiniLM-L6-v2's weights as installed (an
  ensemble's MiniLM half, MiniLM off the shelf) are referenced, not copied: ``config.json`` lists their keys under
  ``packaged`` with the SHA-256 of the packaged weights file, and loading checks that file before it trusts them
  (format version 2; version 1 copies every tensor and still loads).

Training logs this folder inside an MLflow pyfunc (``encoders.model.pyfunc``, its ``saved_model``
artifact). Runs that logged the bare folder, and models logged before this format (MLflow's
pytorch flavour, the whole module pickled with ``vocab_data`` and ``max_words`` attributes),
still load: :func:`load_model_dir` tells the three apart by their files.
"""
from __future__ import annotations

import importlib
import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from encoders.towers.twotower import TwoTowerModel
from pipeline.core.errors import ConfigError, InputError
from pipeline.features.trigram import TrigramVocab

FORMAT = "deepsent-two-tower"
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)  # version 1: every tensor in weights.pt (no packaged references)
CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE = "config.json", "vocab.json", "weights.pt"
FILES = (CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILE)
SAVED_MODEL = "saved_model"  # the pyfunc's artifact key (and folder name) of config + vocabulary + weights


@dataclass
class SavedModel:
    """A two-tower model with what reading text needs: its vocabulary and word cut."""

    model: Any  # TwoTowerModel (or an old pickled module with the same interface)
    vocab: TrigramVocab
    max_words: int | None
    gamma: float | None = None


def model_config(model: TwoTowerModel, vocab: TrigramVocab, max_words: int | None,
                 gamma: float | None = None) -> dict[str, Any]:
    """The ``config.json`` of ``model``: everything needed to rebuild it from the registry."""
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model_type": model.model_type,
        "towers": {side: dict(tower.config) for side, tower in model.towers().items()},
        "out_dim": model.out_dim, "vocab_size": model.vocab_size, "vocab_version": vocab.version,
        "max_words": max_words, "gamma": gamma,
    }


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def save_model(model: TwoTowerModel, vocab: TrigramVocab, max_words: int | None, folder: str | Path,
               gamma: float | None = None) -> Path:
    """Write ``config.json``, ``vocab.json`` and ``weights.pt`` of ``model`` into ``folder`` (the packaged MiniLM
    weights it holds unchanged referenced, not copied); returns it."""
    if model.vocab_size != vocab.size:
        raise ConfigError(f"model has {model.vocab_size} trigram rows but the vocabulary {vocab.size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
    config = model_config(model, vocab, max_words, gamma)
    referenced, digest = packaged_keys(model, state)
    if referenced:
        config["packaged"] = {"weights_sha256": digest, "keys": referenced}
    _write_json(folder / CONFIG_FILE, config)
    _write_json(folder / VOCAB_FILE, vocab.to_dict())
    torch.save({k: v for k, v in state.items() if k not in set(referenced)}, folder / WEIGHTS_FILE)
    return folder


def packaged_keys(model: Any, state: dict[str, torch.Tensor]) -> tuple[list[str], str]:
    """The keys of ``state`` whose tensors are the installed packaged MiniLM's, bit for bit (in every MiniLM tower of
    ``model``), and the SHA-256 of that package's weights file; ([], "") when the model has no MiniLM tower."""
    from encoders.towers.minilm import MiniLMTower, packaged_sha256, packaged_state

    towers = [name for name, module in model.named_modules() if isinstance(module, MiniLMTower)]
    if not towers:
        return [], ""
    keys = [f"{name}.{key}" for name in towers for key, tensor in packaged_state().items()
            if torch.equal(state[f"{name}.{key}"], tensor)]
    return keys, packaged_sha256()


def _with_packaged(model: Any, state: dict[str, torch.Tensor], config: dict[str, Any], source: str) -> None:
    """Load ``state`` into ``model`` (built from the registry: its MiniLM towers hold the installed packaged weights),
    the keys ``config`` says are the packaged MiniLM's kept as built, once the installed package is checked to be the
    one the model was saved with."""
    packaged = config.get("packaged")
    if packaged is None:
        model.load_state_dict(state)
        return
    from encoders.towers.minilm import packaged_sha256

    installed = packaged_sha256()
    if installed != packaged["weights_sha256"]:
        raise InputError(f"{source}/{CONFIG_FILE}", f"was saved with the packaged all-MiniLM-L6-v2 weights of SHA-256 "
                         f"{packaged['weights_sha256'][:12]}…, but the installed package's are {installed[:12]}…: "
                         "install the version it was saved with")
    loaded = model.load_state_dict(state, strict=False)
    if loaded.unexpected_keys or set(loaded.missing_keys) != set(packaged["keys"]):
        raise InputError(f"{source}/{WEIGHTS_FILE}", "its tensors and the packaged ones it references are not the "
                         f"model's ({len(loaded.missing_keys)} missing, {len(loaded.unexpected_keys)} unexpected)")


def _read_json(path: Path, source: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{source}/{path.name}", f"cannot be read: {exc}") from None


def load_saved_model(folder: str | Path, source: str | None = None) -> SavedModel:
    """The model saved by :func:`save_model` in ``folder``, rebuilt from the registry on the CPU."""
    folder = Path(folder)
    source = source or str(folder)
    config = _read_json(folder / CONFIG_FILE, source)
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise InputError(f"{source}/{CONFIG_FILE}", f"not a {FORMAT} config")
    if config.get("format_version") not in READ_VERSIONS:
        raise InputError(f"{source}/{CONFIG_FILE}", f"format version {config.get('format_version')!r} is not "
                                                    f"one of {READ_VERSIONS}; a newer deepsent wrote it")
    vocab = TrigramVocab.from_dict(_read_json(folder / VOCAB_FILE, source), f"{source}/{VOCAB_FILE}")
    if vocab.version != config["vocab_version"]:
        raise InputError(f"{source}/{VOCAB_FILE}", f"vocabulary {vocab.version} != {config['vocab_version']} of the config")
    towers = config["towers"]
    if towers["query"] != towers["doc"]:
        raise InputError(f"{source}/{CONFIG_FILE}", "query and document towers of different configs are not supported")
    model = TwoTowerModel(config["model_type"], vocab.size, towers["query"])
    state = torch.load(folder / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    _with_packaged(model, state, config, source)
    return SavedModel(model.eval(), vocab, config["max_words"], config.get("gamma"))


#: Where the classes that old pickled models name live now (the modules moved into subpackages):
#: the only old import paths kept, and only while :func:`load_pickled_model` reads such a model.
MOVED_MODULES = {
    **{f"encoders.{name}": f"encoders.towers.{name}"
       for name in ("batch", "input_layer", "twotower", "lstm", "rnn", "bilstm", "dssm", "clsm", "minilm", "ensemble")},
    "encoders.registry": "encoders.towers.tower_classes",
    "pipeline.trigram": "pipeline.features.trigram",
}


@contextmanager
def _old_import_paths() -> Iterator[None]:
    """Each moved module also importable at its old path (:data:`MOVED_MODULES`), for the unpickler only."""
    added = [old for old in MOVED_MODULES if old not in sys.modules]
    try:
        for old in added:
            sys.modules[old] = importlib.import_module(MOVED_MODULES[old])
        yield
    finally:
        for old in added:
            sys.modules.pop(old, None)


def load_pickled_model(folder: str | Path, source: str | None = None) -> SavedModel:
    """A model logged the old way: MLflow's pytorch flavour, pickled with ``vocab_data``/``max_words``."""
    import mlflow.pytorch

    source = source or str(folder)
    with _old_import_paths():
        model = mlflow.pytorch.load_model(str(folder), map_location="cpu")
    vocab = TrigramVocab.from_dict(getattr(model, "vocab_data", None), source, require_version=False)
    return SavedModel(model.eval(), vocab, getattr(model, "max_words", None))


def _mlmodel_flavors(folder: str | Path) -> dict[str, Any]:
    """The flavours named by ``folder``'s ``MLmodel`` file (empty when there is none)."""
    mlmodel = Path(folder, "MLmodel")
    if not mlmodel.is_file():
        return {}
    from mlflow.models import Model

    return Model.load(str(mlmodel)).flavors


def is_pickled_model(folder: str | Path) -> bool:
    """Whether ``folder`` holds an MLflow pytorch-flavour model (an ``MLmodel`` file naming it)."""
    return "pytorch" in _mlmodel_flavors(folder)


def saved_model_path(folder: str | Path) -> str | None:
    """Where the ``MLmodel`` of ``folder`` says a deepsent pyfunc keeps its saved model (relative), else None."""
    artifacts = _mlmodel_flavors(folder).get("python_function", {}).get("artifacts") or {}
    return artifacts.get(SAVED_MODEL, {}).get("path")


def pyfunc_saved_model(folder: str | Path) -> Path | None:
    """The saved-model folder inside a deepsent pyfunc (``encoders.model.pyfunc``) at ``folder``, else None."""
    path = saved_model_path(folder)
    return Path(folder, path) if path and Path(folder, path, CONFIG_FILE).is_file() else None


def load_model_dir(folder: str | Path, source: str | None = None) -> SavedModel:
    """The model in ``folder``, whichever it holds: a deepsent pyfunc (a saved model inside), a saved model
    (runs logged before the pyfunc) or an old pickled MLflow pytorch model."""
    source = source or str(folder)
    if Path(folder, CONFIG_FILE).is_file():
        return load_saved_model(folder, source)
    inside = pyfunc_saved_model(folder)
    if inside is not None:
        return load_saved_model(inside, source)
    if is_pickled_model(folder):
        return load_pickled_model(folder, source)
    raise InputError(source, f"holds neither {CONFIG_FILE} (a saved deepsent model), a deepsent pyfunc nor an "
                             "MLflow pytorch model")
