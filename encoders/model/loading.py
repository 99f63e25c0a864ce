"""The one way a logged model is loaded: :func:`load_encoder` (embed, analyze, compare, search use it).

It takes ``runs:/<id>/model``, ``models:/<name>/<version>`` or a bare run id, loads the logged model
in any format it was saved in (:mod:`encoders.model.saved_model`) and returns a
:class:`~encoders.model.text_encoder.TextEncoder`: the model with its vocabulary, word cut, MLflow
run and device.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from encoders.model.device import resolve_device
from encoders.model.text_encoder import TextEncoder
from encoders.model.tracking import model_uri_of, redacted, run_id_of
from pipeline.core.config import Settings


def load_model(model_uri: str, settings: Settings) -> tuple[Any, str]:
    """The :class:`~encoders.model.saved_model.SavedModel` at ``model_uri`` (``runs:/<id>/model``,
    ``models:/<name>/<version>`` or a run id), in either format, and its run id."""
    import tempfile

    import mlflow
    from mlflow.exceptions import MlflowException

    from encoders.model.saved_model import load_model_dir
    from pipeline.core.errors import DeepsentError

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    model_uri = model_uri_of(model_uri)
    try:
        run_id = run_id_of(model_uri)
        with tempfile.TemporaryDirectory(prefix="deepsent-model-") as scratch:
            source = logged_model_uri(model_uri, run_id, settings) or model_uri
            folder = (saved_model_files(files_location(source, settings), scratch)
                      or mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=scratch))
            saved = load_model_dir(folder, model_uri)
    except (MlflowException, OSError) as exc:
        raise DeepsentError(f"cannot load model {model_uri} from {redacted(settings.mlflow_tracking_uri)}: {exc}") from None
    return saved, run_id


def logged_model_uri(model_uri: str, run_id: str, settings: Settings) -> str | None:
    """``models:/<model id>`` of the logged model a ``runs:/<id>/<name>`` URI names, or None (another URI, or a model
    logged as run artifacts before MLflow 3).

    MLflow would first look for ``<name>`` among the run's own artifacts, where an MLflow 3 model is not: a
    tracking server answers that miss with HTTP 500, which the client retries for minutes before it looks
    at the logged models.
    """
    from mlflow import MlflowClient

    prefix = f"runs:/{run_id}/"
    name = model_uri[len(prefix):].strip("/") if model_uri.startswith(prefix) else ""
    if not name or "/" in name:
        return None
    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    experiment = client.get_run(run_id).info.experiment_id
    found = client.search_logged_models(experiment_ids=[experiment],
                                        filter_string=f"name = '{name}' AND source_run_id = '{run_id}'")
    matched = [m for m in found if m.source_run_id == run_id]
    return f"models:/{matched[0].model_id}" if len(matched) == 1 else None


def files_location(source: str, settings: Settings) -> str | None:
    """The artifact URI of the folder holding the files of the MLflow 3 logged model ``source`` names
    (``models:/<model id>``, or a registry version logged from one), or None for another URI."""
    import re

    from mlflow import MlflowClient
    from mlflow.store.artifact.utils.models import get_model_name_and_version

    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    if source.startswith("models:/") and not re.fullmatch(r"models:/m-[0-9a-f]+", source):
        source = client.get_model_version(*get_model_name_and_version(client, source)).source
    logged = re.fullmatch(r"models:/(m-[0-9a-f]+)", source or "")
    return client.get_logged_model(logged.group(1)).artifact_location if logged else None


def saved_model_files(location: str | None, scratch: str) -> str | None:
    """The folder of a deepsent pyfunc at ``location`` with only what loading reads: its ``MLmodel`` and its saved
    model (config, vocabulary, weights), not the ~100 files of code it carries for serving (through a tracking
    server each file is one authenticated request); None when ``location`` holds no deepsent pyfunc."""
    import mlflow

    from encoders.model.saved_model import saved_model_path

    if location is None:
        return None
    folder = Path(scratch, "model")
    mlflow.artifacts.download_artifacts(artifact_uri=f"{location.rstrip('/')}/MLmodel", dst_path=str(folder))
    inside = saved_model_path(folder)
    if inside is None:
        return None
    mlflow.artifacts.download_artifacts(artifact_uri=f"{location.rstrip('/')}/{inside}",
                                       dst_path=str(folder / Path(inside).parent))
    return str(folder)


def load_encoder(model_uri: str, settings: Settings, device: str | None = None) -> TextEncoder:
    """The encoder logged at ``model_uri`` (run URI, registry URI or run id), on ``device`` or the settings' device."""
    saved, run_id = load_model(model_uri, settings)
    return TextEncoder(saved.model, saved.vocab, saved.max_words, run_id, model_uri_of(model_uri),
                       resolve_device(device or settings.device), training_params(settings, run_id))


def training_params(settings: Settings, run_id: str) -> dict[str, Any]:
    """The run's training settings that tell grid points apart: n (negatives) and gamma."""
    from mlflow import MlflowClient

    params = MlflowClient(tracking_uri=settings.mlflow_tracking_uri).get_run(run_id).data.params
    return {label: params[key] for label, key in (("n", "negatives"), ("gamma", "gamma")) if key in params}


#: The label of the packaged all-MiniLM-L6-v2, used off the shelf (the baseline's row, the ensemble's half).
OFF_THE_SHELF_LABEL = "MiniLM-L6 off-the-shelf"


def packaged_minilm(vocab: Any, max_words: int | None = None, device: Any = None) -> TextEncoder:
    """all-MiniLM-L6-v2 off the shelf as a text encoder: one tower for queries and titles, reading as many word
    pieces as the packaged model does (the baseline and the ensemble's off-the-shelf half: the same weights, so the
    same vector key). ``vocab`` and ``max_words`` are the encoder's it joins (a text tower reads no trigram)."""
    from encoders.towers.minilm import packaged_max_tokens
    from encoders.towers.twotower import TwoTowerModel

    model = TwoTowerModel("minilm", vocab.size, {"shared": True, "max_tokens": packaged_max_tokens()})
    encoder = TextEncoder(model, vocab, max_words, device=device)
    encoder.label = OFF_THE_SHELF_LABEL  # not the tower type's name: these are the packaged weights, untrained here
    return encoder
