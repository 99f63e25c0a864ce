"""Which feature version a stage uses: the one asked for, the latest, or the one built from the same pairs
with the wanted negatives. Nothing is built here: a version that does not exist is an error naming the
``deepsent featurize`` command that builds it.
"""
from __future__ import annotations

from typing import Any, Iterator

from pipeline.core.config import Settings
from pipeline.core.defaults import NEGATIVE_SOURCES, NEGATIVES
from pipeline.core.errors import ConfigError
from pipeline.core.results import FeatureSet
from pipeline.features.feature_files import LATEST, feature_root, read_manifest
from pipeline.features.featurize import feature_set
from pipeline.storage.store import Store
from pipeline.storage.locations import folder


def _manifests(store: Store) -> Iterator[dict[str, Any]]:
    """Every feature version's manifest in the store."""
    for candidate in store.list_dirs(folder("features")):
        path = f"{feature_root(candidate)}/manifest.json"
        if store.exists(path):
            yield read_manifest(store, candidate)


def _latest_manifest(store: Store) -> dict[str, Any]:
    if not store.exists(LATEST):
        raise ConfigError(f"no feature shards in {store.uri('features')}: run deepsent featurize first")
    return read_manifest(store)


def matching_version(store: Store, negatives: int, negative_source: str) -> dict[str, Any]:
    """The manifest of the version built from the latest pairs with ``negatives`` negatives from ``negative_source``."""
    latest = _latest_manifest(store)
    wanted = {**latest["params"], "negatives": negatives, "negative_source": negative_source}
    for manifest in [latest, *_manifests(store)]:
        params = {"negative_source": NEGATIVE_SOURCES[0], **manifest["params"]}
        if params == wanted and manifest["pairs_fingerprint"] == latest["pairs_fingerprint"]:
            return manifest
    flag = "" if negative_source == NEGATIVE_SOURCES[0] else f" --negative-source {negative_source}"
    raise ConfigError(f"no features with {negatives} {negative_source} negatives built from the latest pairs "
                      f"(features {latest['version']}): run deepsent featurize --negatives {negatives}{flag}")


def resolve_features(settings: Settings, version: str, negatives: int) -> FeatureSet:
    """The features to train on: ``version``, else LATEST, else the version of the same pairs built for ``negatives``."""
    store = Store.from_settings(settings)
    if version:
        manifest = read_manifest(store, version)
        if manifest["negatives"] != negatives:
            raise ConfigError(f"features {version} have {manifest['negatives']} negatives per pair, "
                              f"the config asks for {negatives}")
        return feature_set(store, manifest)
    latest = _latest_manifest(store)
    if latest["negatives"] == negatives:
        return feature_set(store, latest)
    source = latest["params"].get("negative_source", NEGATIVE_SOURCES[0])
    return feature_set(store, matching_version(store, negatives, source))


def ship_features_version(settings: Settings) -> str:
    """The features whose held-out click lists the ship choice and the gate rank: n = 4, skipped negatives."""
    return matching_version(Store.from_settings(settings), NEGATIVES, NEGATIVE_SOURCES[1])["version"]
