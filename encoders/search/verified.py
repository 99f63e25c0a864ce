"""Embeddings and indexes read only after they are checked against what their writer recorded.

``embed`` records every part it wrote (size, SHA-256) and the row counts; ``build_index`` records
``index.faiss``, ``ids.parquet`` and the BM25 index's files (``bm25/``), the run the index belongs to
and its count. A reader that finds a part missing, truncated or swapped, an index of another run, or
counts that disagree stops with one line naming the file and the command that rebuilds it (:class:`~pipeline.core.artifacts.ArtifactError`).
Folders written before checksums were recorded are checked by their listed parts and counts.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from encoders.search import vector_index as vi
from encoders.search.bm25 import BM25Index
from pipeline.core.artifacts import ArtifactError, read_manifest, require_keys, verify_files
from pipeline.core.store import Store


def checked_embeddings(store: Store, root: str, model_uri: str) -> tuple[dict[str, Any], list[str]]:
    """The embeddings manifest of ``root`` and its title parts, every part present and intact, the rows all there."""
    rebuild = f"deepsent embed --model-uri {model_uri}"
    path = f"{root}/manifest.json"
    manifest = read_manifest(store, path, rebuild)
    require_keys(store, path, manifest, ("dim", "model", "model_type", "run_id", "titles"), rebuild)
    verify_files(store, root, manifest.get("files", {}), rebuild)
    recorded = manifest["titles"].get("parts")
    present = store.list_files(f"{root}/titles", ".parquet")
    if recorded is not None and sorted(recorded) != present:
        odd = sorted(set(recorded) ^ set(present))
        raise ArtifactError(store.uri(odd[0]), "missing from the title parts" if odd[0] in recorded else
                            "a title part the embedding did not write", rebuild)
    try:
        rows = sum(store.parquet_file(f).metadata.num_rows for f in present)
    except (OSError, pa.ArrowException) as exc:
        raise ArtifactError(store.uri(f"{root}/titles"), f"a part is not readable Parquet ({_first_line(exc)})",
                            rebuild) from None
    if rows != manifest["titles"]["rows"]:
        raise ArtifactError(store.uri(f"{root}/titles"), f"{rows:,} titles where {manifest['titles']['rows']:,} were "
                            "embedded", rebuild)
    return manifest, present


def checked_index(store: Store, root: str, model_uri: str, run_id: str) -> tuple[dict[str, Any], Any, pa.Table]:
    """(manifest, FAISS index, ids table) of the index folder ``root`` of ``model_uri`` (run ``run_id``), checked."""
    rebuild = f"deepsent index --model-uri {model_uri}"
    path = f"{root}/manifest.json"
    manifest = read_manifest(store, path, rebuild)
    require_keys(store, path, manifest, ("run_id", "count", "params", "index_type", "model_type"), rebuild)
    if manifest["run_id"] != run_id:
        raise ArtifactError(store.uri(path), f"an index of run {manifest['run_id']}, not of run {run_id} of "
                            f"{model_uri}", rebuild)
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
    if index.ntotal != manifest["count"] or ids.num_rows != manifest["count"]:
        raise ArtifactError(store.uri(root), f"the index holds {index.ntotal:,} vectors and ids.parquet "
                            f"{ids.num_rows:,} rows where {manifest['count']:,} titles were indexed", rebuild)
    return manifest, index, ids


def checked_bm25(store: Store, root: str, manifest: dict[str, Any], titles: list[str], model_uri: str) -> BM25Index | None:
    """The BM25 index saved under ``root/bm25/`` (its files already checked with the index's), or None for an
    index written before BM25 was saved."""
    names = sorted(name for name in manifest.get("files", {}) if name.startswith("bm25/"))
    if not names:
        return None
    try:
        return BM25Index.from_files({name[len("bm25/"):]: store.read_bytes(f"{root}/{name}") for name in names}, titles)
    except (ValueError, OSError, KeyError) as exc:
        raise ArtifactError(store.uri(f"{root}/bm25"), f"not a readable BM25 index ({_first_line(exc)})",
                            f"deepsent index --model-uri {model_uri}") from None


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (FAISS and Arrow add C++ stack context below it)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
