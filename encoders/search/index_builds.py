"""Index builds, published atomically: a rebuild is written beside the live index and switched in by one write.

An index's home, ``indexes/<model_type>/<version>/``, holds complete builds under ``builds/<build id>/``
(``index.faiss``, ``ids.parquet``, ``bm25/``, ``manifest.json``) and the pointer ``current.json`` that names
the build being served. ``deepsent index`` writes a new build folder, and only once every file and the
manifest are written does it rewrite ``current.json`` (one small file: a rename on a local store, a single
PUT on S3). Readers resolve the pointer first (:func:`live_folder`), so a search sees the old build or
the new one, never a mix, and a killed ``deepsent index`` leaves the old build serving.

After the switch, every other build is removed except the one just replaced (kept until the next
rebuild, for a search that read the pointer a moment before the switch). A build a killed run left
half-written (no manifest) is removed by a later rebuild once it is :data:`STALE_BUILD_S` old, so a build
still being written by another run is left alone. An index written before builds existed (its files
directly in the home) is still served while no pointer is there, and removed once a build replaces it.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import secrets

from pipeline.core.artifacts import ArtifactError, read_manifest
from pipeline.core.errors import DeepsentError
from pipeline.core.store import Store

POINTER = "current.json"
BUILDS = "builds"
#: A half-written build older than this (by the time in its id) was left by a killed run.
STALE_BUILD_S = 3600
#: The files of an index written before builds, directly in its home.
LEGACY_FILES = ("manifest.json", "index.faiss", "ids.parquet", "bm25")
_BUILD_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]{8}")


def new_build(home: str) -> str:
    """The store folder of a new build of the index at ``home``: ``builds/<UTC time>-<random>``."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{home}/{BUILDS}/{stamp}-{secrets.token_hex(4)}"


def live_folder(store: Store, home: str, rebuild: str) -> str | None:
    """The folder that serves the index at ``home``: the build ``current.json`` names, else an index written
    before builds (its manifest directly in ``home``), else None (never indexed)."""
    pointer = f"{home}/{POINTER}"
    if store.exists(pointer):
        build = read_manifest(store, pointer, rebuild).get("build")
        if not isinstance(build, str) or not _BUILD_ID.fullmatch(build):
            raise ArtifactError(store.uri(pointer), f"names no build ({str(build)[:60]!r} is not a build id)", rebuild)
        folder = f"{home}/{BUILDS}/{build}"
        if not store.exists(f"{folder}/manifest.json"):
            raise ArtifactError(store.uri(pointer), f"names build {build}, which has no manifest.json", rebuild)
        return folder
    return home if store.exists(f"{home}/manifest.json") else None


def publish(store: Store, home: str, build: str) -> None:
    """Make the complete ``build`` folder the one served at ``home`` (one atomic write of ``current.json``),
    then remove the builds it supersedes."""
    pointer = f"{home}/{POINTER}"
    replaced = _named_build(store, pointer)
    store.write_json(pointer, {"build": _build_id(build)})
    for name in LEGACY_FILES:
        store.delete(f"{home}/{name}")
    now = dt.datetime.now(dt.timezone.utc)
    for name in store.list_dirs(f"{home}/{BUILDS}"):
        match = _BUILD_ID.fullmatch(name)
        if match is None or name in (_build_id(build), replaced):
            continue
        complete = store.exists(f"{home}/{BUILDS}/{name}/manifest.json")
        started = dt.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
        if complete or (now - started).total_seconds() > STALE_BUILD_S:
            store.delete(f"{home}/{BUILDS}/{name}")


def _named_build(store: Store, pointer: str) -> str | None:
    """The build id ``pointer`` names, or None (no pointer, or a damaged one: the switch replaces it)."""
    try:
        build = json.loads(store.read_bytes(pointer)).get("build")
    except (DeepsentError, ValueError, AttributeError):
        return None
    return build if isinstance(build, str) and _BUILD_ID.fullmatch(build) else None


def _build_id(folder: str) -> str:
    """The build id at the end of a build folder (or the id itself)."""
    return str(folder).rstrip("/").rsplit("/", 1)[-1]
