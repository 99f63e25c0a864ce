"""One stored part of an encoder part's vectors: its Parquet file and the record that binds it to its key.

A part ``vectors/<key>/part-<digest>.parquet`` (normalised text, vector) is published with its record
``part-<digest>.json``, written after it: the record format, the part file, the key of the folder it was written
to, the encoder part that key is derived from (:func:`encoders.model.text_encoder.part_recipe`: class, settings,
weights digest, vocabulary), the run and model that wrote it, the dimension, the rows, the size and the SHA-256.
:func:`read_part` checks all of it against the folder the part sits in and the encoder part that asks for it, and
every vector value finite, before one vector is used: a part copied in from another model's folder, of another
dimension, empty, without its vector column, with NaN values, or recorded by an older format is one
:class:`~pipeline.storage.artifacts.ArtifactError` naming the file and the command that removes it (the next stage
that needs its texts encodes them again, to the same bytes: :mod:`encoders.model.shape_batches`).
"""
from __future__ import annotations

import hashlib
import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from encoders.model.text_encoder import VECTORS_FORMAT
from pipeline.core.errors import DeepsentError
from pipeline.storage.artifacts import ArtifactError, is_count, is_positive_int, shown
from pipeline.storage.store import Store

#: What a part's record holds (a record without ``key`` and ``part`` was written before parts were bound).
RECORD_FIELDS = ("format", "file", "key", "part", "run_id", "encoder", "dim", "rows", "size", "sha256")


class NonFiniteVectors(DeepsentError):
    """A model gave NaN or infinite vector values: nothing of them is stored."""


def finite_rows(vectors: np.ndarray) -> np.ndarray:
    """Positions of the rows of ``vectors`` with a NaN or infinite value."""
    return np.flatnonzero(~np.isfinite(vectors).all(axis=1)) if vectors.size else np.empty(0, dtype=np.int64)


def part_bytes(texts: list[str], vectors: np.ndarray) -> bytes:
    """The Parquet bytes of one part: (text, vector) rows, vectors as fixed-size lists of float32."""
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
    table = pa.table({"text": pa.array(texts, pa.string()),
                      "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def part_record(file: str, key: str, recipe: dict[str, Any], writer: dict[str, str], dim: int, rows: int,
                data: bytes) -> dict[str, Any]:
    """The record of the part ``file`` of key ``key`` (``writer``: the run and the model label that wrote it)."""
    return {"format": VECTORS_FORMAT, "file": file, "key": key, "part": recipe, "run_id": writer["run_id"],
            "encoder": writer["encoder"], "dim": dim, "rows": rows, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


class PartReader:
    """Reads the parts of one key folder for the encoder part described by ``recipe`` (of ``dim`` dimensions)."""

    def __init__(self, store: Store, folder: str, key: str, recipe: dict[str, Any], dim: int) -> None:
        self.store, self.folder, self.key, self.recipe, self.dim = store, folder, key, recipe, dim

    def read(self, record_path: str) -> dict[str, np.ndarray]:
        """The vector of every text of the part ``record_path`` records, everything checked first."""
        part = record_path[: -len(".json")] + ".parquet"
        remove = f"rm -f {self.store.uri(record_path)} {self.store.uri(part)}"
        record = self._record(record_path, part, remove)
        try:
            data = self.store.read_bytes(part)
        except (OSError, DeepsentError) as exc:
            raise ArtifactError(self.store.uri(part), f"the vector part its record names is unreadable "
                                f"({_first_line(exc)})", remove) from None
        if len(data) != record["size"] or hashlib.sha256(data).hexdigest() != record["sha256"]:
            raise ArtifactError(self.store.uri(part), "its checksum differs from the one recorded when it was written",
                                remove)
        return self._vectors(part, data, record["rows"], remove)

    def _record(self, path: str, part: str, remove: str) -> dict[str, Any]:
        """The record at ``path``, bound to this folder's key, encoder part and dimension."""
        where = self.store.uri(path)
        try:
            record = self.store.read_json(path)
        except (OSError, ValueError, DeepsentError) as exc:
            raise ArtifactError(where, f"an unreadable vector part record ({_first_line(exc)})", remove) from None
        if not isinstance(record, dict):
            raise ArtifactError(where, f"an unreadable vector part record ({shown(record)})", remove)
        lacking = [name for name in RECORD_FIELDS if name not in record]
        if "key" in lacking or "part" in lacking or record.get("format") != VECTORS_FORMAT:
            raise ArtifactError(where, f"a vector part recorded by format {shown(record.get('format', 1))}, not "
                                f"{VECTORS_FORMAT} (not bound to its key)", f"rm -r {self.store.uri(self.folder)}")
        if lacking:
            raise ArtifactError(where, f"the vector part record lacks {', '.join(lacking)}", remove)
        if record["key"] != self.key:
            raise ArtifactError(where, f"a vector part of key {shown(record['key'])} ({shown(record['encoder'])}, "
                                f"run {shown(record['run_id'])}) in the folder of key {self.key}", remove)
        if record["part"] != self.recipe:
            raise ArtifactError(where, f"a vector part of another encoder part than the one key {self.key} is derived "
                                f"from ({shown(record['encoder'])}, run {shown(record['run_id'])})", remove)
        if record["dim"] != self.dim:
            raise ArtifactError(where, f"{shown(record['dim'])}-dimensional vectors where this encoder part gives "
                                f"{self.dim}", remove)
        if record["file"] != part:
            raise ArtifactError(where, f"the record names the part {shown(record['file'])}, not the one beside it",
                                remove)
        for name, ok, what in (("rows", is_positive_int, "a positive whole number"),
                               ("size", is_count, "a whole number")):
            if not ok(record[name]):
                raise ArtifactError(where, f"{name} is {shown(record[name])}, not {what}", remove)
        return record

    def _vectors(self, part: str, data: bytes, rows: int, remove: str) -> dict[str, np.ndarray]:
        """The part's (text, vector) rows: readable Parquet of its recorded rows, dimension and finite values."""
        where = self.store.uri(part)
        try:
            table = pq.read_table(io.BytesIO(data))
        except (OSError, pa.ArrowException) as exc:
            raise ArtifactError(where, f"not readable Parquet ({_first_line(exc)})", remove) from None
        wanted = pa.schema([("text", pa.string()), ("vector", pa.list_(pa.float32(), self.dim))])
        if not table.schema.remove_metadata().equals(wanted):
            columns = ", ".join(f"{f.name} {f.type}" for f in table.schema)
            raise ArtifactError(where, f"its columns are ({columns[:200]}), not (text string, vector of {self.dim} "
                                "float32)", remove)
        if table.num_rows != rows or table["text"].null_count:
            raise ArtifactError(where, f"{table.num_rows} rows ({table['text'].null_count} without a text) where "
                                f"{rows} texts were written", remove)
        flat = table["vector"].combine_chunks()
        if flat.null_count or flat.flatten().null_count:
            raise ArtifactError(where, "a vector or a vector value is null", remove)
        matrix = flat.flatten().to_numpy(zero_copy_only=False).reshape(rows, self.dim)
        texts = table["text"].to_pylist()
        bad = finite_rows(matrix)
        if bad.size:
            raise ArtifactError(where, f"{bad.size} vector(s) with a NaN or infinite value (the first of "
                                f"{shown(texts[bad[0]])})", remove)
        return dict(zip(texts, matrix))


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message, cut to 200 characters (Arrow adds context lines below it)."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]
