"""MLflow bookkeeping of training runs: experiment, params, per-epoch metrics, artifacts, models.

The tracking URI comes from the settings (default a SQLite file under the store root); with a
local database the experiment's artifacts live under ``<store>/mlartifacts`` (or the S3 store
prefix), next to the data they were trained on. A model is logged as the run's ``model``: an
MLflow pyfunc that turns texts into vectors (``encoders.model.pyfunc``) holding config + vocabulary +
weights (``encoders.model.saved_model``, no pickled classes), registered under ``deepsent-<model type>``;
older runs (the bare saved-model folder, or a pickled MLflow pytorch model) still load
(:mod:`encoders.model.loading`). What a training run logs is :mod:`encoders.training.run_log`.
"""
from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.core.config import Settings
from pipeline.runtime.interrupt import held_back

log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "deepsent"
MODEL_ARTIFACT = "model"
#: The loggers MLflow points at stderr when imported (``mlflow.utils.logging_utils._configure_mlflow_loggers``).
MLFLOW_OWNED_LOGGERS = ("mlflow", "sqlalchemy.engine", "alembic", "huey")


def adopt_mlflow_loggers() -> None:
    """MLflow's loggers drop the stderr handler MLflow gave them and propagate to the application's handlers
    (the CLI's, which shows them only with -v; an Airflow task's log at their own level)."""
    from mlflow.utils import logging_utils

    for name in MLFLOW_OWNED_LOGGERS:
        owned = logging.getLogger(name)
        owned.handlers = [h for h in owned.handlers if getattr(h, "stream", None) is not logging_utils.MLFLOW_LOGGING_STREAM]
        owned.propagate = True


def redacted(uri: str) -> str:
    """``uri`` without any ``user:password@`` part (safe to print)."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return uri
    return f"{scheme}://***@{rest.split('@', 1)[1]}"


def registered_name(model_type: str) -> str:
    """Model-registry name of a model type, e.g. ``deepsent-lstm``."""
    return f"deepsent-{model_type}"


def _artifact_root(settings: Settings) -> str | None:
    """Where a new experiment keeps its artifacts: under the store for a local tracking database."""
    uri = settings.mlflow_tracking_uri
    if uri.startswith(("http://", "https://", "databricks")):
        return None  # a tracking server decides (e.g. --artifacts-destination)
    if settings.store_is_s3:
        return f"{settings.store}/mlartifacts"
    return Path(settings.store, "mlartifacts").resolve().as_uri()


def database_missing(uri: str) -> bool:
    """True when ``uri`` is a SQLite tracking store whose file does not exist yet (reading it would create it)."""
    if not uri.startswith("sqlite:///"):
        return False
    path = uri.removeprefix("sqlite:///").split("?", 1)[0]
    return path != ":memory:" and not Path(path).exists()


def experiment_id(settings: Settings, name: str = DEFAULT_EXPERIMENT) -> str:
    """Point MLflow at the settings' tracking URI and return the id of experiment ``name`` (created if new)."""
    import mlflow

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=_artifact_root(settings))


@contextmanager
def run(settings: Settings, experiment: str, run_id: str | None = None, run_name: str | None = None,
        tags: dict[str, str] | None = None, superseding: dict[str, str] | None = None) -> Iterator[Any]:
    """An active MLflow run (a new one, or ``run_id`` continued after a resume) with ``tags`` set.

    It ends FINISHED, KILLED when interrupted, FAILED on an error (see :func:`end_status`), the status written
    whole whatever signal arrives (:func:`end_run`). The run names its owning process; before a new run starts,
    the experiment's runs left RUNNING by killed processes, or by earlier tries of the Airflow task
    ``superseding`` names, are ended KILLED (:func:`encoders.model.run_owner.end_left_runs`).
    """
    import mlflow

    from encoders.model.run_owner import end_left_runs, owner_tags

    exp = experiment_id(settings, experiment)
    if run_id is None:  # a new run: first end the runs killed processes left in this experiment
        end_left_runs(settings, experiment, superseding=superseding)
    # the owner (this process, also of a resumed run) and the tags are set as the run starts: a kill finds them there
    tags = {k: str(v) for k, v in {**owner_tags(), **(tags or {})}.items()}
    active = None
    try:
        with held_back():  # a stop while the run is created is raised once it exists, and ends it KILLED below
            active = mlflow.start_run(run_id=run_id, experiment_id=None if run_id else exp, run_name=run_name, tags=tags)
        yield active
    except BaseException as exc:
        if active is not None:
            end_run(active.info.run_id, end_status(exc), type(exc).__name__)
        raise
    end_run(active.info.run_id, "FINISHED")


#: How long ending a run retries while the SQLite database says it is locked, and the first pause between tries.
LOCKED_RETRY_S, LOCKED_FIRST_PAUSE_S = 60.0, 0.1


def end_run(run_id: str, status: str, cause: str = "") -> None:
    """Write ``status`` as run ``run_id``'s end (it leaves MLflow's active runs), retrying with growing pauses while
    the database is locked; SIGINT and SIGTERM wait until it is written. Logged only once the database holds it;
    when it never could be written the run stays RUNNING, its owner gone, for the next run to end."""
    import mlflow
    from mlflow import MlflowClient

    pause, deadline = LOCKED_FIRST_PAUSE_S, time.monotonic() + LOCKED_RETRY_S
    with held_back():
        active = mlflow.active_run()
        first = active is not None and active.info.run_id == run_id  # mlflow.end_run: out of the active runs, then written
        while True:
            try:
                mlflow.end_run(status) if first else MlflowClient().set_terminated(run_id, status)
                break
            except Exception as exc:  # noqa: BLE001 - only a locked database is tried again
                first = False
                if "database is locked" not in str(exc) or time.monotonic() + pause > deadline:
                    if not cause:  # a run that finished: the error is the caller's to report
                        raise
                    log.warning("MLflow run %s could not be ended %s (%s): it stays RUNNING until the next run of its "
                                "experiment ends it", run_id, status, str(exc).splitlines()[0])
                    return
                time.sleep(pause)
                pause = min(2 * pause, 2.0)
    if cause:
        log.warning("MLflow run %s ended %s (%s)", run_id, status, cause)


def end_status(exc: BaseException) -> str:
    """MLflow status of a run stopped by ``exc``: KILLED for an interruption (``KeyboardInterrupt`` from Ctrl-C or
    SIGTERM, Airflow's task terminated or timed out), also one an error was raised while handling; FAILED for an
    error (an ``Exception``)."""
    seen: BaseException | None = exc
    while seen is not None:
        if not isinstance(seen, Exception):
            return "KILLED"
        seen = seen.__context__
    return "FAILED"


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> ``{"tower.ncell": "96", ...}`` (MLflow params are flat strings)."""
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = str(value)
    return out


def log_params(params: dict[str, Any]) -> None:
    """Log a (nested) config as params of the active run."""
    import mlflow

    mlflow.log_params(flatten(params))


def log_model(model: Any, vocab: Any, max_words: int | None, gamma: float | None = None,
              register: bool = True) -> dict[str, Any]:
    """Log ``model`` as the active run's ``model``, a pyfunc (texts -> vectors, ``encoders.model.pyfunc``) holding
    config + vocabulary + weights, and register it as a new version of ``deepsent-<model type>``."""
    import mlflow

    from encoders.model.pyfunc import log_pyfunc

    name = registered_name(model.model_type)
    info = log_pyfunc(model, vocab, max_words, gamma, MODEL_ARTIFACT)
    run_id = mlflow.active_run().info.run_id
    version = register_version(name, info.model_uri, run_id, info.model_id) if register else None
    return {
        "model_uri": model_uri_of(run_id),
        "registered_name": name if register else None,
        "registered_version": version,
        "registry_uri": f"models:/{name}/{version}" if register else None,
    }


def register_version(name: str, source: str, run_id: str, model_id: str | None = None) -> str:
    """A new version of registered model ``name`` (created if new) whose files are at ``source``."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient()
    try:
        client.create_registered_model(name)
    except MlflowException as exc:
        if exc.error_code not in ("RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"):
            raise
    return str(client.create_model_version(name, source, run_id=run_id, model_id=model_id).version)


def model_uri_of(ref: str) -> str:
    """A model URI from ``ref``: a bare run id means that run's ``model``; URIs pass unchanged."""
    return f"runs:/{ref}/{MODEL_ARTIFACT}" if re.fullmatch(r"[0-9a-f]{32}", ref) else ref


def run_id_of(model_uri: str) -> str:
    """The MLflow run that logged the model at ``model_uri`` (``runs:/...`` or ``models:/<name>/<version|alias>``)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
    from mlflow.store.artifact.utils.models import get_model_name_and_version

    if model_uri.startswith("runs:/"):
        return model_uri.split("/")[1]
    if model_uri.startswith("models:/"):
        client = MlflowClient()
        version = client.get_model_version(*get_model_name_and_version(client, model_uri))
        if version.run_id:
            return version.run_id
    raise MlflowException(f"{model_uri} names no MLflow run (use runs:/<run-id>/model or models:/<name>/<version>)")


def log_metrics_to_run(settings: Settings, run_id: str, metrics: dict[str, float]) -> None:
    """Add metrics to an existing (possibly finished) run, e.g. embedding throughput."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    client = MlflowClient()
    for key, value in metrics.items():
        client.log_metric(run_id, key, float(value))


def find_runs(settings: Settings, filter_string: str = "", experiment: str = DEFAULT_EXPERIMENT) -> list[Any]:
    """Runs of ``experiment`` matching an MLflow ``filter_string``, newest first."""
    import mlflow

    exp = experiment_id(settings, experiment)
    return mlflow.search_runs(experiment_ids=[exp], filter_string=filter_string, output_format="list",
                              order_by=["attributes.start_time DESC"])
