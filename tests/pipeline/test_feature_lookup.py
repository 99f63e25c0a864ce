"""The feature lookup of a training run: the version asked for, the latest, or one built for its n."""
from __future__ import annotations

import pytest

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError
from pipeline.core.results import FeatureSet
from pipeline.features.feature_files import latest_version, read_manifest
from pipeline.features.feature_lookup import resolve_features
from pipeline.storage.store import Store


def test_a_version_with_another_n_is_refused(train_settings: Settings) -> None:
    version = latest_version(Store.from_settings(train_settings))
    with pytest.raises(ConfigError, match="have 4 negatives per pair, the config asks for 2"):
        resolve_features(train_settings, version, 2)
    found = resolve_features(train_settings, version, 4)
    assert isinstance(found, FeatureSet) and found.version == version
    assert found.uris["manifest"] == Store.from_settings(train_settings).uri(f"features/{version}/manifest.json")


def test_features_for_another_n_are_found_never_built(train_settings: Settings) -> None:
    from pipeline.features.featurize import featurize

    store = Store.from_settings(train_settings)
    four = read_manifest(store)
    with pytest.raises(ConfigError, match="no features with 2 random negatives built from the latest pairs.*"
                                          "run deepsent featurize --negatives 2$"):
        resolve_features(train_settings, "", 2)  # a missing input is an error, never a featurize run hidden here
    assert read_manifest(store)["version"] == four["version"]  # nothing was built
    two = featurize(train_settings, **{**four["params"], "negatives": 2}).version
    manifest = read_manifest(store, two)
    assert manifest["negatives"] == 2 and {**manifest["params"], "negatives": 4} == four["params"]
    assert resolve_features(train_settings, "", 2).version == two  # now the latest
    assert resolve_features(train_settings, "", 4).version == four["version"]  # found among the versions
    assert resolve_features(train_settings, "", 2) == resolve_features(train_settings, two, 2)
