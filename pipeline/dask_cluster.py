"""One way to get a Dask client: a LocalCluster on 127.0.0.1, or the cluster named in the settings.

Local workers are forked processes (``distributed.worker.multiprocessing-method = fork``):
inside Airflow task processes, spawned workers die re-importing Airflow (see stack.md).

A forked worker inherits Dask's "offload" thread pool (``distributed.utils._offload_executor``,
which (de)serialises messages above ``distributed.comm.offload``, 10 MiB) but not its thread: once
the parent has offloaded one message, e.g. in an earlier cluster of the same process, the pool in
the child believes it has its one thread and never starts another, and the worker hangs on its
first message above 10 MiB. :func:`_fresh_offload_pool` gives every forked child a new pool.

Local workers also run without Dask's statistical profiler (``distributed.worker.profile``: a
callback on each worker's event loop that samples the task thread's stack every 10 ms, for the
dashboard's Profile tab only). On a 2-core machine its CPU comes out of the tasks' share: it is
about a third of the workers' non-task CPU in a ``featurize`` of the 30-day log. Dask's own
switch, ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED``, wins when it is set.
"""
from __future__ import annotations

import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import dask

from pipeline.config import Settings
from pipeline.errors import ConfigError

if TYPE_CHECKING:
    from dask.distributed import Client

log = logging.getLogger(__name__)

#: Dask's environment variable for the workers' statistical profiler (off in local clusters unless set).
PROFILER_SWITCH = "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"


def _fresh_offload_pool() -> None:
    """In a forked child: replace Dask's offload thread pool, whose thread did not survive the fork."""
    utils = sys.modules.get("distributed.utils")
    if utils is not None:
        utils._offload_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="Dask-Offload")


os.register_at_fork(after_in_child=_fresh_offload_pool)


@contextmanager
def dask_client(settings: Settings, connect_timeout_s: float = 30.0) -> Iterator["Client"]:
    """A distributed Client for the duration of the block; a local cluster is shut down afterwards."""
    from dask.distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO chatter would drown the stage's logs

    if settings.dask_address:
        try:
            client = Client(settings.dask_address, timeout=connect_timeout_s, set_as_default=False)
        except OSError as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {settings.dask_address}: {exc}") from exc
        log.info("connected to Dask scheduler %s", settings.dask_address)
        try:
            yield client
        finally:
            client.close()
        return
    if settings.dask_workers < 1:
        raise ConfigError(f"DEEPSENT_DASK_WORKERS must be >= 1, got {settings.dask_workers}")
    local_config: dict[str, object] = {"distributed.worker.multiprocessing-method": "fork"}
    if PROFILER_SWITCH not in os.environ:
        local_config["distributed.worker.profile.enabled"] = False
    with dask.config.set(local_config):
        cluster = LocalCluster(
            n_workers=settings.dask_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",  # the scheduler always serves HTTP; a fixed 8787 may be taken
            silence_logs=logging.WARNING,
        )
        log.info("started a local Dask cluster of %d worker(s)", settings.dask_workers)
        try:
            with Client(cluster, set_as_default=False) as client:
                yield client
        finally:
            cluster.close()
