"""Index builds, published atomically: a rebuild is written beside the live index and switched in by one write.

An index's home, ``indexes/<model_type>/<version>/``, holds complete builds under ``builds/<build id>/``
(``index.faiss``, ``ids.parquet``, ``bm25/``, ``manifest.json``) and the pointer ``current.json`` that names
the build being served. ``deepsent index`` writes a new build folder (:func:`writing`), and only once every file
and the manifest are written does it rewrite ``current.json`` (:func:`publish`: one small file, a rename on a
local store, a single PUT on S3). Readers resolve the pointer first (:func:`live_folder`), so a search sees the
old build or the new one, never a mix, and a killed ``deepsent index`` leaves the old build serving. A build
that fails (a full disk, an error, SIGTERM) is removed at once, and the error says so.

After the switch, every other build is removed except the one just replaced (kept until the next rebuild, for
a search that read the pointer a moment before the switch). A build a killed run left half-written (no
manifest) is removed by a later rebuild once it is stale: its id's time more than :data:`STALE_BUILD_S` past,
or ahead of the clock by more than :data:`CLOCK_SKEW_S` (no run writes a build from the future), so a build
still being written by another run is left alone. A folder that is no build id of ours is left alone with a
warning. Which builds go is settled before the switch; removing them after it only warns when it fails, so
nothing fails once the new build serves. An index written before builds existed (its files directly in the
home) is still served while no pointer is there, and removed once a build replaces it.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.core.errors import DeepsentError, StoreError
from pipeline.storage.artifacts import ArtifactError, read_manifest
from pipeline.storage.filesystems import NOTHING_LEFT, WRITE_ERRNOS
from pipeline.storage.store import Store

log = logging.getLogger(__name__)

POINTER = "current.json"
BUILDS = "builds"
#: A half-written build older than this (by the time in its id) was left by a killed run.
STALE_BUILD_S = 3600
#: How far ahead of this machine's clock another writer's clock may run; a build id further ahead is stale.
CLOCK_SKEW_S = 300
#: The files of an index written before builds, directly in its home.
LEGACY_FILES = ("manifest.json", "index.faiss", "ids.parquet", "bm25")
_BUILD_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]{8}")
_STAMP = "%Y%m%dT%H%M%SZ"


def new_build(home: str) -> str:
    """The store folder of a new build of the index at ``home``: ``builds/<UTC time>-<random>``."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime(_STAMP)
    return f"{home}/{BUILDS}/{stamp}-{secrets.token_hex(4)}"


@contextmanager
def writing(store: Store, home: str) -> Iterator[str]:
    """A new build folder of the index at ``home`` for the block to write (and publish). When the block fails
    before the pointer names the build, the partial build is removed, and a store error says so."""
    build = new_build(home)
    try:
        yield build
    except BaseException as exc:
        if _named_build(store, f"{home}/{POINTER}") == build_id(build):
            raise  # switched in: it serves, it stays
        note = _remove(store, build, "the partial build")
        if isinstance(exc, StoreError) or (isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS):
            raise StoreError(f"{str(exc).removesuffix(NOTHING_LEFT).rstrip('; ')}; {note}") from None
        log.info("%s", note)  # (a removal that failed was a warning already)
        raise


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
    then remove the builds it supersedes (chosen before the switch; a removal that fails is a warning)."""
    pointer = f"{home}/{POINTER}"
    if not store.exists(f"{build}/manifest.json"):
        raise DeepsentError(f"{store.uri(build)}: not a complete build (no manifest.json); not switched in")
    superseded = _superseded(store, home, {build_id(build), _named_build(store, pointer)})
    store.write_json(pointer, {"build": build_id(build)})
    for name in LEGACY_FILES:
        _remove(store, f"{home}/{name}", "a file of the index written before builds")
    for folder in superseded:
        _remove(store, folder, "the superseded build")


def _superseded(store: Store, home: str, kept: set[str | None]) -> list[str]:
    """The build folders under ``home`` a switch removes: every complete build not ``kept``, and every stale
    half-written one; a folder that is no build id is left alone with a warning."""
    now = dt.datetime.now(dt.timezone.utc)
    out = []
    for name in _build_names(store, f"{home}/{BUILDS}"):
        folder = f"{home}/{BUILDS}/{name}"
        started = _started(name)
        if started is None:
            log.warning("%s: not a build of deepsent index (a build is named <UTC time YYYYmmddTHHMMSSZ>-<8 hex "
                        "digits>); left alone", store.uri(folder))
            continue
        if name in kept:
            continue
        age = (now - started).total_seconds()
        if store.exists(f"{folder}/manifest.json") or age > STALE_BUILD_S or age < -CLOCK_SKEW_S:
            out.append(folder)
    return out


def _build_names(store: Store, builds: str) -> list[str]:
    """The folders under ``builds``, one that holds only the temporary file of a write cut short included (a run
    killed while writing its first file: the store's listings skip temporary files, so it lists no such folder)."""
    names = set(store.list_dirs(builds))
    folder = Path(store.uri(builds))
    if not store.is_s3 and folder.is_dir():  # S3 has no folders without objects, and no temporary files
        names |= {path.name for path in folder.iterdir() if path.is_dir()}
    return sorted(names)


def _started(name: str) -> dt.datetime | None:
    """When the build ``name`` was started, by its id; None for a name that is no build id (or an impossible time)."""
    match = _BUILD_ID.fullmatch(name)
    if match is None:
        return None
    try:
        return dt.datetime.strptime(match.group(1), _STAMP).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _remove(store: Store, path: str, what: str) -> str:
    """Remove ``path`` from the store; what happened, as a sentence (a failure is also logged as a warning)."""
    try:
        store.delete(path)
    except (OSError, DeepsentError) as exc:
        note = f"{what} {store.uri(path)} could not be removed ({exc}); a later deepsent index removes it"
        log.warning("%s", note)
        return note
    return f"{what} {store.uri(path)} was removed"


def _named_build(store: Store, pointer: str) -> str | None:
    """The build id ``pointer`` names, or None (no pointer, or a damaged one: the switch replaces it)."""
    try:
        build = json.loads(store.read_bytes(pointer)).get("build")
    except (DeepsentError, ValueError, AttributeError, OSError):
        return None
    return build if isinstance(build, str) and _BUILD_ID.fullmatch(build) else None


def build_id(folder: str) -> str:
    """The build id at the end of a build folder (or the id itself)."""
    return str(folder).rstrip("/").rsplit("/", 1)[-1]
