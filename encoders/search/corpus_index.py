"""Where a model's corpus index lives, and the queries an approximate index is tuned on.

The served object that builds, publishes, opens and searches an index: :mod:`encoders.search.served_index` (what one
build writes: :mod:`encoders.search.index_publish`). ``<version>`` in ``indexes/<model_type>/<version>/`` is the
registry version for ``models:/<name>/<N>`` or ``models:/<name>@<alias>`` (``<name>-<N>`` for a registered model
other than ``deepsent-<model_type>``, e.g. the served ``deepsent-ranker``), else the run id (:func:`index_root`).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from encoders.model.tracking import model_uri_of, registered_name
from encoders.search import vector_index as vi
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.features.click_lists import seeded_sample
from pipeline.storage.store import Store
from pipeline.storage.locations import folder, working

INDEXES_ROOT = folder("index")
SEARCH_ROOT = working("search")


def resolve_version(settings: Settings, model_uri: str) -> tuple[str, str]:
    """(version, run id) of ``model_uri``: the registry version of ``models:/`` URIs, else the run id."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    uri = model_uri_of(model_uri)
    client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
    if match := re.fullmatch(r"models:/([^/@]+)@([^/@]+)", uri):
        name, alias = match.groups()
        try:
            version = client.get_model_version_by_alias(name, alias)
        except MlflowException:
            raise ConfigError(f"no {alias}: {uri} is not set; pass --model-uri or run deepsent promote") from None
    elif match := re.fullmatch(r"models:/([^/@]+)/(\d+)", uri):
        try:
            version = client.get_model_version(*match.groups())
        except MlflowException:
            raise ConfigError(f"no model {uri} in the registry at {settings.mlflow_tracking_uri}") from None
    elif match := re.fullmatch(r"runs:/([0-9a-f]{32})/.+", uri):
        return match.group(1), match.group(1)
    else:
        raise ConfigError(f"{model_uri} is not a model URI (runs:/<id>/model, models:/<name>/<N>, models:/<name>@<alias>)")
    return str(version.version), str(version.run_id)


def index_root(model_type: str, version: str, model_uri: str = "") -> str:
    """The store folder of the index of ``model_type`` at ``version`` of ``model_uri``: ``<version>`` for a run
    or the per-type registered model (``deepsent-lstm``), ``<name>-<version>`` for another registered model
    (``deepsent-ranker-3``), whose numbers count its own versions."""
    name = re.match(r"models:/([^/@]+)", model_uri_of(model_uri)) if model_uri else None
    if name and name.group(1) != registered_name(model_type):
        version = f"{name.group(1)}-{version}"
    return f"{INDEXES_ROOT}/{model_type}/{version}"


def tuning_queries(store: Store, seed: int) -> list[str]:
    """Up to :data:`vi.TUNE_QUERIES` distinct training click queries (a seeded sample of ``pairs/train.parquet``), what
    an approximate index's nprobe is tuned on: never a judged query; none without click pairs (the index then tunes
    on held-out titles)."""
    if not store.exists("pairs/train.parquet"):
        return []
    return seeded_sample(store.read_table("pairs/train.parquet", columns=["query"])["query"].to_pylist(), seed,
                         vi.TUNE_QUERIES)


def tuning_vectors(store: Store, seed: int, encoder: Any, count: int, exact_max: int | None = None) -> np.ndarray | None:
    """The :func:`tuning_queries`' vectors through ``encoder`` when an index of ``count`` titles is approximate
    (:func:`vi.plan`, ``exact_max`` its exact bound), else None (nothing to tune)."""
    queries = tuning_queries(store, seed) if vi.plan(count, exact_max) != "exact" else []
    return encoder.encode(queries, "query") if queries else None


def training_query_vectors(settings: Settings, store: Store, model_uri: str, seed: int,
                           encoder: Any = None) -> np.ndarray | None:
    """The :func:`tuning_queries`' vectors through ``model_uri`` (``encoder``: the model, already loaded); None without
    click pairs."""
    from encoders.model.loading import load_encoder

    queries = tuning_queries(store, seed)
    return (encoder or load_encoder(model_uri, settings)).encode(queries, "query") if queries else None
