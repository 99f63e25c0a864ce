"""The artifact store: Parquet datasets, JSON and bytes by URI, on a local directory or S3.

Every path handed to the store is relative to its root (``clicks/dt=2026-01-01/part-0.parquet``)
or a full URI under it. Writes are atomic: a local file is written to a temporary name in the
same folder and renamed; an S3 object becomes visible only when its upload completes, so a
retried task overwrites instead of duplicating. Credentials come from the standard AWS
environment variables and are never stored on the object, printed or logged.
"""
from __future__ import annotations

import errno
import io
import json
import os
import posixpath
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, DeepsentError, StoreError
from pipeline.core.readable import readable_bytes
from pipeline.storage.filesystems import (TEMP_PREFIX, WRITE_ERRNOS, access_refused, s3_filesystem, write_atomically,
                                          write_refused)

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}


class Store:
    """Reads and writes artifacts under one root (local directory or ``s3://bucket/prefix``)."""

    def __init__(self, root: str, endpoint_url: str = "", region: str = "us-east-1") -> None:
        self.root = root.rstrip("/") if root.startswith("s3://") else str(Path(root).resolve())
        self.is_s3 = self.root.startswith("s3://")
        self._endpoint_url = endpoint_url
        self._region = region
        self._fs: pafs.FileSystem | None = None
        self._swept: set[Path] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> "Store":
        """The store a stage should use for ``settings``."""
        return cls(settings.store, settings.s3_endpoint_url, settings.s3_region)

    def __repr__(self) -> str:
        return f"Store({self.root!r})"

    # ---- paths ---------------------------------------------------------------------------
    @property
    def fs(self) -> pafs.FileSystem:
        """The pyarrow filesystem behind the store (S3 clients built lazily, from the env)."""
        if self._fs is None:
            if self.is_s3:
                self._fs = s3_filesystem(self._endpoint_url, self._region)
            else:
                try:
                    Path(self.root).mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise self._access_error("cannot create its folder", exc) from None
                self._fs = pafs.LocalFileSystem()
        return self._fs

    def check(self, write: bool = True) -> None:
        """Write and delete a probe file (``write``), else look at the root without writing or creating anything
        (a command that only reads, so a read-only store serves it): a :class:`StoreError` now instead of a
        traceback mid-stage."""
        probe, started = f"{TEMP_PREFIX}check-{uuid.uuid4().hex}", time.monotonic()
        if not write:
            self._check_readable(started)
            return
        try:
            if self.is_s3:
                self.write_bytes(probe, b"")
            else:
                write_atomically(Path(self.uri(probe)), b"", self._swept)
            self.fs.delete_file(self._fs_path(probe))
        except OSError as exc:
            waited = f", after {time.monotonic() - started:.0f} s" if self.is_s3 else ""
            raise self._access_error(f"cannot write files there{waited}", exc) from None

    def _check_readable(self, started: float) -> None:
        """A :class:`StoreError` when the root cannot be read: a file, a folder without read permission, an S3
        bucket that does not answer. A missing local root is no error (nothing has been written yet)."""
        if self.is_s3:
            try:
                self.fs.get_file_info(self._fs_path(""))
            except OSError as exc:
                raise self._access_error(f"cannot read there, after {time.monotonic() - started:.0f} s", exc) from None
            return
        root = Path(self.root)
        if root.exists() and not root.is_dir():
            raise self._access_error("cannot read it", OSError(errno.ENOTDIR, "not a directory"))
        if root.exists() and not os.access(root, os.R_OK | os.X_OK):
            raise self._access_error("cannot read it", OSError(errno.EACCES, "permission denied"))

    def require_space(self, need_bytes: int, what: str) -> None:
        """A :class:`StoreError` before a long write when a local store's disk has less than ``need_bytes`` free
        (an S3 store has no such figure)."""
        if self.is_s3:
            return
        folder = Path(self.root)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        free = shutil.disk_usage(folder).free
        if need_bytes > free:
            raise StoreError(f"store {self.root}: {what} needs about {readable_bytes(need_bytes)} and "
                             f"{readable_bytes(free)} are free; ask for less or free space")

    def _access_error(self, what: str, exc: OSError) -> StoreError:
        """One line for a store that cannot be used (see :func:`access_refused`)."""
        return access_refused(self.root, self._endpoint_url, what, exc)

    def uri(self, relpath: str = "") -> str:
        """Full URI of ``relpath`` under the root."""
        relpath = self.relpath(relpath)
        if not relpath:
            return self.root
        return f"{self.root}/{relpath}" if self.is_s3 else str(Path(self.root) / relpath)

    def relpath(self, path_or_uri: str) -> str:
        """``path_or_uri`` made relative to the root (URIs under the root are accepted)."""
        p = str(path_or_uri)
        if p == self.root or p.startswith(self.root + "/"):
            return self._confined(p[len(self.root):].strip("/"), path_or_uri)
        if p.startswith("s3://") or (not self.is_s3 and os.path.isabs(p)):
            raise ConfigError(f"{path_or_uri} is not under the store root {self.root}")
        return self._confined(p.strip("/"), path_or_uri)

    def _confined(self, relpath: str, given: str) -> str:
        """``relpath`` when it stays under the root: no ``..`` step, and (local) no symlink that leads out."""
        if ".." in relpath.split("/"):
            raise ConfigError(f"{given}: a path with '..' is refused; give a path inside the store {self.root}")
        if relpath and not self.is_s3:
            real = os.path.realpath(os.path.join(self.root, relpath))
            if real != self.root and not real.startswith(self.root + os.sep):
                raise ConfigError(f"{given}: a symlink leads out of the store {self.root}; refused")
        return relpath

    def _fs_path(self, relpath: str) -> str:
        full = self.uri(relpath)
        return full[len("s3://"):] if self.is_s3 else full

    # ---- existence and listing -------------------------------------------------------
    def exists(self, relpath: str) -> bool:
        """True when a file or a non-empty folder exists at ``relpath``."""
        info = self.fs.get_file_info(self._fs_path(relpath))
        if info.type == pafs.FileType.File:
            return True
        if info.type == pafs.FileType.Directory:
            return bool(self.list_files(relpath))
        return bool(self.is_s3 and self.list_files(relpath))

    def list_files(self, prefix: str, suffix: str = "") -> list[str]:
        """Relative paths of the files under ``prefix`` (recursive, sorted), ending in ``suffix``."""
        selector = pafs.FileSelector(self._fs_path(prefix), recursive=True, allow_not_found=True)
        base = self._fs_path("")
        out = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File or not info.path.endswith(suffix):
                continue
            name = posixpath.basename(info.path)
            if name.startswith(TEMP_PREFIX):
                continue
            out.append(info.path[len(base):].lstrip("/"))
        return sorted(out)

    def list_dirs(self, prefix: str) -> list[str]:
        """Names of the immediate sub-folders of ``prefix`` (sorted)."""
        files = self.list_files(prefix)
        base = self.relpath(prefix)
        names = {f[len(base):].lstrip("/").split("/")[0] for f in files if "/" in f[len(base):].lstrip("/")}
        return sorted(names)

    def delete(self, relpath: str) -> None:
        """Remove a file, or every file under a folder; a missing path is not an error."""
        path = self._fs_path(relpath)
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.File:
            self.fs.delete_file(path)
            return
        for f in self.list_files(relpath):
            self.fs.delete_file(self._fs_path(f))
        if info.type == pafs.FileType.Directory and not self.is_s3:
            self.fs.delete_dir(path)

    # ---- bytes, text, json ----------------------------------------------------------------
    def write_bytes(self, relpath: str, data: bytes) -> str:
        """Atomically write ``data`` to ``relpath``; returns its URI."""
        relpath = self.relpath(relpath)
        if self.is_s3:
            with self.fs.open_output_stream(self._fs_path(relpath)) as out:
                out.write(data)
            return self.uri(relpath)
        try:
            return write_atomically(Path(self.uri(relpath)), data, self._swept)
        except OSError as exc:
            if exc.errno in WRITE_ERRNOS:
                raise write_refused(self.uri(relpath), exc) from None
            raise

    def read_bytes(self, relpath: str) -> bytes:
        """The bytes stored at ``relpath``."""
        with self.open_input(relpath) as src:
            return src.read()

    def open_input(self, relpath: str, random_access: bool = False) -> pa.NativeFile:
        """The file at ``relpath`` opened for reading piece by piece (a stream, or with ``random_access`` a file that
        seeks, as Parquet needs); a DeepsentError when it is not there."""
        try:
            path = self._fs_path(relpath)
            return self.fs.open_input_file(path) if random_access else self.fs.open_input_stream(path)
        except FileNotFoundError as exc:
            raise DeepsentError(f"{self.uri(relpath)}: not found in the store") from exc

    def size(self, relpath: str) -> int:
        """The bytes of the file at ``relpath`` (none read; 0 when it is not there)."""
        return self.fs.get_file_info(self._fs_path(relpath)).size or 0

    def write_text(self, relpath: str, text: str) -> str:
        """Atomically write UTF-8 ``text``."""
        return self.write_bytes(relpath, text.encode("utf-8"))

    def read_text(self, relpath: str) -> str:
        """UTF-8 text stored at ``relpath``."""
        return self.read_bytes(relpath).decode("utf-8")

    def write_json(self, relpath: str, obj: Any) -> str:
        """Atomically write ``obj`` as indented, key-sorted JSON (stable bytes for equal objects)."""
        return self.write_text(relpath, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def read_json(self, relpath: str) -> Any:
        """The JSON object stored at ``relpath``."""
        return json.loads(self.read_text(relpath))

    def put_file(self, relpath: str, local_path: str | os.PathLike[str]) -> str:
        """Copy a local file into the store atomically."""
        return self.write_bytes(relpath, Path(local_path).read_bytes())

    def get_file(self, relpath: str, local_path: str | os.PathLike[str]) -> Path:
        """Copy a stored file to ``local_path`` (its folder is created)."""
        dest = Path(local_path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.read_bytes(relpath))
        return dest

    # ---- parquet ----------------------------------------------------------------------------
    def write_table(self, relpath: str, table: pa.Table, **options: Any) -> str:
        """Atomically write one Parquet file; deterministic bytes for equal tables."""
        sink = io.BytesIO()
        pq.write_table(table, sink, **{**PARQUET_OPTIONS, **options})
        return self.write_bytes(relpath, sink.getvalue())

    def read_table(self, relpath: str, columns: list[str] | None = None) -> pa.Table:
        """A Parquet file, or every ``*.parquet`` under a folder concatenated in path order."""
        files = [relpath] if relpath.endswith(".parquet") else self.list_files(relpath, ".parquet")
        if not files:
            raise DeepsentError(f"{self.uri(relpath)}: no Parquet data in the store")
        tables = [pq.read_table(self._fs_path(f), filesystem=self.fs, columns=columns) for f in files]
        return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]

    def iter_tables(self, relpath: str, columns: list[str] | None = None) -> Iterator[tuple[str, pa.Table]]:
        """Each Parquet file under ``relpath`` in path order, one at a time (flat memory)."""
        for f in self.list_files(relpath, ".parquet"):
            yield f, pq.read_table(self._fs_path(f), filesystem=self.fs, columns=columns)

    def parquet_file(self, relpath: str) -> pq.ParquetFile:
        """An open ParquetFile for streaming row groups/batches of one file."""
        return pq.ParquetFile(self.open_input(relpath, random_access=True))

    def replace_dataset(self, prefix: str, parts: Iterable[tuple[str, pa.Table]]) -> list[str]:
        """Write the files ``parts`` (name, table) under ``prefix`` and delete any other file there.

        Re-running a stage therefore leaves exactly the new files: no duplicates, no leftovers.
        """
        prefix = self.relpath(prefix)
        written = [self.write_table(f"{prefix}/{name}", table) for name, table in parts]
        keep = {self.relpath(w) for w in written}
        for stale in self.list_files(prefix):
            if stale not in keep:
                self.fs.delete_file(self._fs_path(stale))
        return written

    def local_path(self, relpath: str) -> Path:
        """The local path of ``relpath`` (only for a local store; S3 callers use get_file)."""
        if self.is_s3:
            raise ConfigError("local_path() is only available for a local store")
        return Path(self.uri(relpath))

    def scratch_dir(self) -> Path:
        """A new private local temporary folder (for libraries that need real files)."""
        return Path(tempfile.mkdtemp(prefix=f"deepsent-{uuid.uuid4().hex[:8]}-"))

