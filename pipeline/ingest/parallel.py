"""Reading landing files with the chosen engine, and ingesting many dates and files on Dask.

Every landing file is one Dask task (read, validate, normalise, hash: :class:`FileResult`) and
every date one more task that waits for its files' results and writes the date's outputs
(:func:`pipeline.ingest.assemble.assemble_partition`). A date is assembled from its files in
path order whatever worker read them, so the bytes written do not depend on the worker count.
The client comes from :func:`pipeline.runtime.dask_cluster.dask_client` (the settings' scheduler, or a
LocalCluster of ``dask_workers``), as for ``featurize``.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, InputError
from pipeline.ingest.arrow_path import read_file_vectorised
from pipeline.ingest.assemble import assemble_partition
from pipeline.ingest.reference_path import FileResult, read_file_per_line
from pipeline.storage.store import Store

#: Ways to read a landing file; ``per-line`` is the reference the vectorised ``arrow`` path must match.
ENGINES: dict[str, Callable[[bytes, str, dt.date], FileResult]] = {
    "arrow": read_file_vectorised,
    "per-line": read_file_per_line,
}
DEFAULT_ENGINE = "arrow"


def check_engine(engine: str) -> None:
    """A ConfigError naming the choices when ``engine`` is not one of ENGINES."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown ingest engine {engine!r}; expected one of {', '.join(ENGINES)}")


def read_landing_file(store: Store, path: str, day: dt.date, engine: str = DEFAULT_ENGINE) -> FileResult:
    """One landing file through ``engine``; an InputError names the file by its full URI."""
    try:
        return ENGINES[engine](store.read_bytes(path), path, day)
    except InputError as exc:  # which store, which bucket
        raise InputError(store.uri(path), exc.reason, exc.row) from None


def ingest_on_dask(settings: Settings, files: dict[dt.date, list[str]], engine: str) -> dict[dt.date, dict[str, Any]]:
    """Ingest every date of ``files`` (date -> its landing files) on Dask; each date's manifest."""
    from pipeline.runtime.dask_cluster import dask_client

    with dask_client(settings) as client:
        dates = {}
        for day, paths in sorted(files.items()):
            parts = [client.submit(_read_task, settings, path, day, engine, pure=False) for path in paths]
            dates[day] = client.submit(_assemble_task, settings, day, parts, pure=False)
        return dict(zip(dates, client.gather(list(dates.values()))))


def _read_task(settings: Settings, path: str, day: dt.date, engine: str) -> FileResult:
    return read_landing_file(Store.from_settings(settings), path, day, engine)


def _assemble_task(settings: Settings, day: dt.date, results: list[FileResult]) -> dict[str, Any]:
    return assemble_partition(Store.from_settings(settings), day, results)
