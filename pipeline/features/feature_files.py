"""What ``featurize`` wrote, as its readers find it: the latest version, a version's manifest, its shards and
vocabulary checked against what the manifest records, and the titles a negative source draws from."""
from __future__ import annotations

import posixpath
from typing import Any

import pyarrow as pa

from pipeline.core.defaults import MINED_SOURCES
from pipeline.core.errors import InputError
from pipeline.features.pair_check import CheckedPairs, check_pairs, quarantine_clicked
from pipeline.features.skipped import SKIPPED_ROOT
from pipeline.features.trigram import TrigramVocab
from pipeline.storage import artifacts
from pipeline.storage.quarantine import Quarantine
from pipeline.storage.store import Store
from pipeline.storage.locations import folder

SPLITS = ("train", "valid")
LATEST = "features/LATEST"
VOCAB_FILE = "vocab.json"
#: The command that rebuilds a feature version (named by every error about damaged features).
REBUILD = "deepsent featurize"


def feature_root(version: str) -> str:
    """The store folder of feature version ``version``."""
    return f"{folder('features')}/{version}"


def latest_version(store: Store) -> str:
    """The version written last by ``featurize`` (``features/LATEST``)."""
    if not store.exists(LATEST):
        raise InputError(store.uri(LATEST), "no feature shards yet; run `deepsent featurize` first")
    return store.read_text(LATEST).strip()


def read_manifest(store: Store, version: str | None = None) -> dict[str, Any]:
    """The manifest of feature ``version`` (default: the latest); one line when it is missing or damaged."""
    version = version or latest_version(store)
    path = f"{feature_root(version)}/manifest.json"
    manifest = artifacts.read_manifest(store, path, REBUILD)
    artifacts.require_keys(store, path, manifest, ("version", "params", "negatives", "vocab", "splits"), REBUILD)
    return manifest


def verify_split(store: Store, manifest: dict[str, Any], split: str) -> None:
    """Every shard of ``split`` that the manifest records a checksum for is there, whole and unchanged."""
    root = feature_root(manifest['version'])
    artifacts.verify_files(store, root, {posixpath.relpath(shard["path"], root): shard
                                         for shard in manifest["splits"][split]["shards"] if "sha256" in shard}, REBUILD)


def load_vocab(store: Store, manifest: dict[str, Any]) -> TrigramVocab:
    """The vocabulary of a feature version, checked against the size and SHA-256 its manifest records (manifests
    written before they were recorded: its own fields and content hash only)."""
    root, recorded = feature_root(manifest['version']), manifest["vocab"]
    if isinstance(recorded, dict) and "sha256" in recorded:
        artifacts.verify_files(store, root, {VOCAB_FILE: recorded}, REBUILD)
    return TrigramVocab.load(store, f"{root}/{VOCAB_FILE}")


def check_skipped(store: Store, checked: dict[str, CheckedPairs], quarantine: Quarantine,
                  source: str = "skipped") -> dict[str, CheckedPairs]:
    """The titles a source draws from, per split: the log's skipped titles (``skipped/<split>.parquet``) or the
    mined ones (``mined/<source>/<split>.parquet``); bad or clicked rows quarantined."""
    clicked = pa.concat_tables([checked[s].clean.select(["query", "title"]) for s in SPLITS])
    if source in MINED_SOURCES:
        folder, hint = f"mined/{source}", (f"no mined titles; `deepsent featurize --negative-source {source}` mines them "
                                           "first (encoders.search.mining)")
    else:
        folder, hint = SKIPPED_ROOT, "no skipped titles; re-run `deepsent pairs` (it writes them) before --negative-source skipped|mixed"
    return {s: quarantine_clicked(check_pairs(store, f"{folder}/{s}.parquet", s, quarantine,
                                              carry=("clicked_doc_id", "tier"), missing_hint=hint), clicked, quarantine)
            for s in SPLITS}
