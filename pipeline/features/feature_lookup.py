"""Which feature version a training run uses: the one asked for, the latest, or one built for its n.

The number of negatives n is fixed at featurisation, so a model trained with another n than the
latest features needs a version of the same pairs and settings with that n: it is found among
the versions already written, or built once with :func:`pipeline.features.featurize.featurize`.
"""
from __future__ import annotations

import logging

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.core.results import FeatureSet
from pipeline.core.store import Store
from pipeline.features.featurize import LATEST, feature_set, featurize, read_manifest

log = logging.getLogger(__name__)


def resolve_features(settings: Settings, version: str, negatives: int) -> FeatureSet:
    """The features to train on: ``version``, else LATEST, else the version of the same pairs built for ``negatives``."""
    store = Store.from_settings(settings)
    if version:
        manifest = read_manifest(store, version)
        if manifest["negatives"] != negatives:
            raise ConfigError(f"features {version} have {manifest['negatives']} negatives per pair, "
                              f"the config asks for {negatives}")
        return feature_set(store, manifest)
    if not store.exists(LATEST):
        log.info("no feature shards yet: featurizing with %d negatives", negatives)
        return featurize(settings, negatives=negatives)
    latest = read_manifest(store)
    if latest["negatives"] == negatives:
        return feature_set(store, latest)
    wanted = {**latest["params"], "negatives": negatives}
    for candidate in store.list_dirs("features"):
        path = f"features/{candidate}/manifest.json"
        if store.exists(path):
            manifest = store.read_json(path)
            if manifest["params"] == wanted and manifest["pairs_fingerprint"] == latest["pairs_fingerprint"]:
                return feature_set(store, manifest)
    log.info("features %s have %d negatives: featurizing the same pairs with %d", latest["version"], latest["negatives"], negatives)
    return featurize(settings, **wanted)
