"""What an artifact folder must contain, recorded by its writer and checked by every reader.

A writer lists the files it wrote in its manifest with their size and SHA-256
(:func:`file_facts`); a reader loads the manifest with :func:`read_manifest` and checks the files
with :func:`verify_files` before it trusts them. A missing, truncated, swapped or unreadable file is
one :class:`ArtifactError` naming the file and the command that rebuilds it: never a traceback,
never wrong results, never a result built from part of the data.
"""
from __future__ import annotations

import hashlib
import json
import math
import posixpath
from typing import Any, Callable

from pipeline.core.errors import DeepsentError
from pipeline.storage.store import Store


class ArtifactError(DeepsentError):
    """An artifact is missing, damaged or does not belong to what asked for it; says how to rebuild it."""

    def __init__(self, where: str, reason: str, rebuild: str) -> None:
        self.where, self.reason, self.rebuild = where, reason, rebuild
        super().__init__(f"{where}: {reason}; rebuild it with `{rebuild}`")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        """Pickle by the constructor's arguments (a Dask worker's error reaches the client whole)."""
        return (type(self), (self.where, self.reason, self.rebuild))


def file_facts(store: Store, folder: str, relpaths: list[str]) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of each file of ``relpaths`` (store paths under ``folder``), keyed by its path in ``folder``."""
    base = store.relpath(folder)
    facts = {}
    for relpath in relpaths:
        data = store.read_bytes(relpath)
        facts[posixpath.relpath(store.relpath(relpath), base)] = {"bytes": len(data),
                                                                  "sha256": hashlib.sha256(data).hexdigest()}
    return dict(sorted(facts.items()))


def read_manifest(store: Store, path: str, rebuild: str) -> dict[str, Any]:
    """The JSON object at ``path``; an ArtifactError when it is missing or is not a JSON object."""
    if not store.exists(path):
        raise ArtifactError(store.uri(path), "missing", rebuild)
    try:
        manifest = json.loads(store.read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(store.uri(path), f"not a readable manifest ({type(exc).__name__})", rebuild) from None
    if not isinstance(manifest, dict):
        raise ArtifactError(store.uri(path), "not a readable manifest (not a JSON object)", rebuild)
    return manifest


def require_keys(store: Store, path: str, manifest: dict[str, Any], keys: tuple[str, ...], rebuild: str) -> None:
    """An ArtifactError naming the first of ``keys`` the manifest at ``path`` lacks."""
    missing = [key for key in keys if key not in manifest]
    if missing:
        raise ArtifactError(store.uri(path), f"the manifest lacks {', '.join(missing)}", rebuild)


def verify_files(store: Store, folder: str, recorded: dict[str, dict[str, Any]], rebuild: str) -> None:
    """Every file the writer recorded under ``folder`` is there with its size and SHA-256."""
    if not isinstance(recorded, dict):
        raise ArtifactError(store.uri(folder), f"the manifest's files are {shown(recorded)}, not a list of files by "
                            "name", rebuild)
    for name, facts in recorded.items():
        path = f"{store.relpath(folder)}/{name}"
        if not (isinstance(facts, dict) and is_count(facts.get("bytes")) and isinstance(facts.get("sha256"), str)):
            raise ArtifactError(store.uri(path), f"its record in the manifest is {shown(facts)}, not its bytes and "
                                "sha256", rebuild)
        if not store.exists(path):
            raise ArtifactError(store.uri(path), "missing (the folder is incomplete)", rebuild)
        data = store.read_bytes(path)
        if len(data) != facts["bytes"]:
            raise ArtifactError(store.uri(path), f"{len(data):,} bytes where {facts['bytes']:,} were written "
                                "(truncated or replaced)", rebuild)
        if hashlib.sha256(data).hexdigest() != facts["sha256"]:
            raise ArtifactError(store.uri(path), "its checksum differs from the one recorded when it was written "
                                "(damaged or replaced)", rebuild)


def manifest_field(store: Store, path: str, manifest: dict[str, Any], key: str, ok: Callable[[Any], bool], what: str,
                   rebuild: str) -> Any:
    """The value at ``key`` of the manifest at ``path`` (a dotted key reaches into nested objects), checked like a
    flag: an ArtifactError naming the file, the field and what it should be when it is missing or ``ok`` fails."""
    value: Any = manifest
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise ArtifactError(store.uri(path), f"the manifest lacks {key}", rebuild)
        value = value[part]
    if not ok(value):
        raise ArtifactError(store.uri(path), f"{key} is {shown(value)}, not {what}", rebuild)
    return value


def field_matches(store: Store, path: str, key: str, recorded: Any, held: Any, holder: str, rebuild: str) -> None:
    """An ArtifactError when a descriptive field of the manifest at ``path`` differs from what ``holder`` holds."""
    if recorded != held:
        raise ArtifactError(store.uri(path), f"{key} is {shown(recorded)} where {holder} holds {shown(held)}", rebuild)


def is_positive_int(value: Any) -> bool:
    """A JSON whole number of at least 1 (not a bool, not a text)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def is_count(value: Any) -> bool:
    """A JSON whole number of at least 0 (not a bool, not a text)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_share(value: Any) -> bool:
    """A finite JSON number from 0 to 1."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


def shown(value: Any) -> str:
    """``value`` as JSON, cut to 60 characters (what an error says the manifest holds)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
