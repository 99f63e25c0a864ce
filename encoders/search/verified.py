"""Indexes read only after they are checked against what their writer recorded.

``build_index`` records ``index.faiss``, ``ids.parquet`` and the BM25 index's files (``bm25/``), the run the index
belongs to and its count. A reader that finds a file missing, truncated or swapped, an index of another run, or
counts that disagree stops with one line naming the file and the command that rebuilds it
(:class:`~pipeline.storage.artifacts.ArtifactError`). (Stored vectors are checked part by part as they are read:
:mod:`encoders.model.vector_parts`.)
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from encoders.search.modes import MODES
from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from pipeline.storage.artifacts import (ArtifactError, field_matches, is_positive_int, is_share,
                                     manifest_field, read_manifest, require_keys, verify_files)
from pipeline.storage.store import Store


def checked_index(store: Store, root: str, model_uri: str, run_id: str) -> tuple[dict[str, Any], Any, pa.Table]:
    """(manifest, FAISS index, ids table) of the index folder ``root`` of ``model_uri`` (run ``run_id``), checked:
    every file against its size and checksum, every setting like a flag, every description against the files."""
    rebuild = f"deepsent index --model-uri {model_uri}"
    path = f"{root}/manifest.json"
    manifest = read_manifest(store, path, rebuild)
    require_keys(store, path, manifest, ("run_id", "count", "dim", "params", "index_type", "model", "model_type"),
                 rebuild)
    if manifest["run_id"] != run_id:
        raise ArtifactError(store.uri(path), f"an index of run {str(manifest['run_id'])[:40]}, not of run {run_id} "
                            f"of {model_uri}", rebuild)
    checked_settings(store, path, manifest, rebuild)
    verify_files(store, root, manifest.get("files", {}), rebuild)
    try:
        index = vi.from_bytes(store.read_bytes(f"{root}/index.faiss"), manifest["params"])
    except RuntimeError as exc:
        raise ArtifactError(store.uri(f"{root}/index.faiss"), f"not a readable FAISS index ({_first_line(exc)})",
                            rebuild) from None
    try:
        ids = store.read_table(f"{root}/ids.parquet")
    except (OSError, pa.ArrowException) as exc:
        raise ArtifactError(store.uri(f"{root}/ids.parquet"), f"not readable Parquet ({_first_line(exc)})",
                            rebuild) from None
    if not {"doc_id", "title"} <= set(ids.column_names):
        raise ArtifactError(store.uri(f"{root}/ids.parquet"), "lacks the doc_id and title columns", rebuild)
    for key, held, holder in (("index_type", type(index).__name__, "index.faiss"), ("dim", index.d, "index.faiss"),
                              ("count", index.ntotal, "index.faiss"), ("count", ids.num_rows, "ids.parquet")):
        field_matches(store, path, key, manifest[key], held, holder, rebuild)
    return manifest, index, ids


def checked_settings(store: Store, path: str, manifest: dict[str, Any], rebuild: str) -> None:
    """The index manifest's numbers and search settings, each of its type and in its range (as a flag would be)."""
    def field(key: str, ok: Any, what: str) -> None:
        manifest_field(store, path, manifest, key, ok, what, rebuild)

    field("count", is_positive_int, "a positive whole number")
    field("dim", is_positive_int, "a positive whole number")
    field("params", lambda value: isinstance(value, dict), "an object of the index's parameters")
    if "nprobe" in manifest["params"]:
        field("params.nprobe", is_positive_int, "a positive whole number")
    if "search" not in manifest:  # an index written before the served mode was chosen: dense, as it was served
        return
    field("search", lambda value: isinstance(value, dict), "an object of search settings")
    field("search.default_mode", lambda mode: mode in MODES, f"one of {', '.join(MODES)}")
    if "linear_weight" in manifest["search"]:
        field("search.linear_weight", is_share, "a number from 0 to 1")


def checked_bm25(store: Store, root: str, manifest: dict[str, Any], titles: list[str], model_uri: str) -> BM25Index | None:
    """The BM25 index saved under ``root/bm25/`` (its files already checked with the index's), its description in
    the manifest equal to what the files hold; None for an index written before BM25 was saved."""
    rebuild = f"deepsent index --model-uri {model_uri}"
    names = sorted(name for name in manifest.get("files", {}) if name.startswith("bm25/"))
    if not names:
        return None
    try:
        bm25 = BM25Index.from_files({name[len("bm25/"):]: store.read_bytes(f"{root}/{name}") for name in names}, titles)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        raise ArtifactError(store.uri(f"{root}/bm25"), f"not a readable BM25 index ({_first_line(exc)})",
                            rebuild) from None
    path = f"{root}/manifest.json"
    recorded = manifest_field(store, path, manifest, "bm25", lambda value: isinstance(value, dict),
                              "an object describing the BM25 index", rebuild)
    held = bm25.describe()
    for key in sorted(set(recorded) | set(held)):
        field_matches(store, path, f"bm25.{key}", recorded.get(key), held.get(key), "bm25/params.index.json", rebuild)
    return bm25


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (FAISS and Arrow add C++ stack context below it)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
