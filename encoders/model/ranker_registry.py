"""The one registered model that serving reads, whatever the tower type: ``deepsent-ranker``.

Its versions are deepsent pyfuncs (``encoders.model.pyfunc``: texts -> vectors); two aliases say
which: ``challenger`` (the newest model put up for promotion) and ``champion`` (what
``deepsent index``/``search`` use). Everything goes through MLflow's registry API; an alias
names one version by construction. :func:`promotion_lock` serialises the read-decide-write of
promotions on one host (a file lock beside the SQLite registry, else under a local store).
"""
from __future__ import annotations

import fcntl
import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from encoders.model.tracking import model_uri_of, register_version, run_id_of
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError

log = logging.getLogger(__name__)

RANKER = "deepsent-ranker"
CHAMPION, CHALLENGER = "champion", "challenger"
CHAMPION_URI = f"models:/{RANKER}@{CHAMPION}"


def client(settings: Settings) -> Any:
    """An MlflowClient on the settings' tracking URI (also made the fluent API's URI)."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    return MlflowClient(settings.mlflow_tracking_uri)


def version_uri(version: str) -> str:
    """``models:/deepsent-ranker/<version>``."""
    return f"models:/{RANKER}/{version}"


def alias_version(mlflow_client: Any, alias: str) -> Any | None:
    """The ranker version ``alias`` names, or None when it is not set (or no ranker exists yet)."""
    from mlflow.exceptions import MlflowException

    try:
        return mlflow_client.get_model_version_by_alias(RANKER, alias)
    except MlflowException:
        return None


def get_version(mlflow_client: Any, version: str) -> Any:
    """Ranker version ``version``, or a ConfigError naming it."""
    from mlflow.exceptions import MlflowException

    try:
        return mlflow_client.get_model_version(RANKER, str(version))
    except MlflowException:
        raise ConfigError(f"no version {version} of {RANKER} in the registry") from None


def _ranker_version_named(mlflow_client: Any, model_uri: str) -> Any | None:
    """The ranker version a ``models:/deepsent-ranker/<N>`` or ``@<alias>`` URI names (None for other URIs)."""
    match = re.fullmatch(rf"models:/{re.escape(RANKER)}(?:/(\d+)|@([\w-]+))", model_uri)
    if match is None:
        return None
    number, alias = match.groups()
    found = get_version(mlflow_client, number) if number else alias_version(mlflow_client, alias)
    if found is None:
        raise ConfigError(f"no {alias}: {model_uri} is not set")
    return found


def _pyfunc_source(settings: Settings, model_uri: str, run_id: str) -> tuple[str, str] | None:
    """(source, logged-model id) of the deepsent pyfunc at ``model_uri``; None for models logged before it."""
    from mlflow.exceptions import MlflowException
    from mlflow.models import get_model_info

    from encoders.model.loading import logged_model_uri
    from encoders.model.saved_model import SAVED_MODEL

    try:  # a runs:/ URI read as its logged model at once (a tracking server's miss is retried for minutes)
        info = get_model_info(logged_model_uri(model_uri, run_id, settings) or model_uri)
    except (MlflowException, OSError):
        return None
    artifacts = info.flavors.get("python_function", {}).get("artifacts") or {}
    if SAVED_MODEL not in artifacts or not info.model_id:
        return None
    return f"models:/{info.model_id}", info.model_id


def register_challenger(settings: Settings, model_uri: str) -> Any:
    """The ranker version of ``model_uri`` (registered from its pyfunc when new), aliased ``challenger``.

    A ranker URI names its version; a training run already registered as a ranker version is not
    registered twice. A model logged before the pyfunc is packaged as one in the active MLflow run.
    """
    mlflow_client = client(settings)
    model_uri = model_uri_of(model_uri)
    version = _ranker_version_named(mlflow_client, model_uri)
    if version is None:
        run_id = run_id_of(model_uri)
        known = mlflow_client.search_model_versions(f"name = '{RANKER}' and run_id = '{run_id}'")
        version = max(known, key=lambda v: int(v.version)) if known else _register(settings, model_uri, run_id)
    mlflow_client.set_registered_model_alias(RANKER, CHALLENGER, version.version)
    return version


def _register(settings: Settings, model_uri: str, run_id: str) -> Any:
    """A new ranker version for the model of training run ``run_id`` at ``model_uri``."""
    source = _pyfunc_source(settings, model_uri, run_id)
    if source is None:
        from encoders.model.loading import load_model
        from encoders.model.pyfunc import log_pyfunc

        saved, _ = load_model(model_uri, settings)
        log.info("%s was logged before the pyfunc format: packaging it as one", model_uri)
        info = log_pyfunc(saved.model, saved.vocab, saved.max_words, saved.gamma, "ranker")
        source = (info.model_uri, info.model_id)
    number = register_version(RANKER, source[0], run_id, source[1])
    return client(settings).get_model_version(RANKER, number)


def logged_model_id(version: Any) -> str | None:
    """The MLflow logged model (``m-...``) behind a ranker version, from its ``models:/m-...`` source."""
    source = str(getattr(version, "source", ""))
    return source.removeprefix("models:/") if source.startswith("models:/m-") else None


def set_champion(mlflow_client: Any, version: str) -> None:
    """Point the ``champion`` alias at ranker version ``version`` (MLflow moves it off the previous one)."""
    mlflow_client.set_registered_model_alias(RANKER, CHAMPION, str(version))


def tag_version(mlflow_client: Any, version: str, tags: dict[str, Any]) -> None:
    """Set ``tags`` (as text) on ranker version ``version``."""
    for key, value in tags.items():
        mlflow_client.set_model_version_tag(RANKER, str(version), key, str(value))


def lock_path(settings: Settings) -> Path | None:
    """Where promotions of this registry take their file lock: beside a SQLite registry, else under a local
    store; None for a remote tracking server with an S3 store (then only the champion re-check guards)."""
    uri = settings.mlflow_tracking_uri
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///") + f".{RANKER}.lock")
    if not settings.store_is_s3:
        return Path(settings.store, "locks", f"{RANKER}.lock")
    return None


@contextmanager
def promotion_lock(settings: Settings) -> Iterator[None]:
    """Hold the host-wide promotion lock of the settings' registry (released when the process dies, too)."""
    path = lock_path(settings)
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
