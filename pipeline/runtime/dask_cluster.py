"""One way to get a Dask client: a LocalCluster on 127.0.0.1, or the cluster named in the settings.

How a local cluster starts its worker processes is the caller's :class:`WorkerRule`, declared by the runtime its
tasks run (``pipeline`` imports no encoder: the caller passes the rule, e.g. the corpus encode passes
:func:`encoders.towers.minilm_runtime.worker_rule`). By default workers are forked
(``distributed.worker.multiprocessing-method = fork``): inside Airflow task processes, spawned workers die
re-importing Airflow (see stack.md). A rule that says its runtime does not survive a fork gets spawned workers
(the DAGs map such work to one task per shard instead of a cluster), and its ``setup`` runs in every worker as it
starts, told how many workers share the machine (a runtime's threads: its share of the cores).

A forked worker inherits Dask's "offload" thread pool (``distributed.utils._offload_executor``,
which (de)serialises messages above ``distributed.comm.offload``, 10 MiB) but not its thread: once
the parent has offloaded one message, e.g. in an earlier cluster of the same process, the pool in
the child believes it has its one thread and never starts another, and the worker hangs on its
first message above 10 MiB. :func:`_fresh_offload_pool` gives every forked child a new pool.

A local cluster shares the machine's cores with its tasks, so two of Dask's monitoring
callbacks are turned down there (:data:`LOCAL_OVERRIDES`); on a 2-core machine their CPU comes
out of the tasks' share:

* the workers' statistical profiler (``distributed.worker.profile``) is off: it samples the task
  thread's stack every 10 ms for the dashboard's Profile tab only, and was about a third of the
  workers' non-task CPU in a ``featurize`` of the 30-day log;
* the event-loop health check (``distributed.admin.tick``) runs every 500 ms instead of every
  20 ms in the scheduler, the nannies and the workers. It only feeds the dashboard's event-loop
  plot and the "event loop was unresponsive" log, which still fires after 3 s. An idle
  2-worker cluster used 0.11 of a core with the 20 ms tick, 0.04-0.06 with 500 ms
  (``bench/stages/featurize.py``, ``idle_cluster_cpu_cores``).

Setting a key's own Dask environment variable (e.g. ``DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL``)
keeps Dask's value for it. A remote cluster keeps its own configuration.
"""
from __future__ import annotations

import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import dask
from distributed.diagnostics.plugin import WorkerPlugin

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, DeepsentError

if TYPE_CHECKING:
    from dask.distributed import Client

log = logging.getLogger(__name__)

#: Dask settings a local cluster changes (see the module docstring), unless their environment variable is set.
LOCAL_OVERRIDES: dict[str, object] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
}


@dataclass(frozen=True)
class WorkerRule:
    """What the tasks of a local cluster need of their worker processes: ``forks`` False when a forked worker would
    hang (they are spawned), ``setup(workers)`` run in each worker as it starts (None: nothing)."""

    forks: bool = True
    setup: Callable[[int], None] | None = None


class _WorkerSetup(WorkerPlugin):
    """A Dask worker plugin that runs a rule's ``setup`` in each worker as it starts (picklable for spawned ones)."""

    name = "deepsent-worker-setup"

    def __init__(self, setup: Callable[[int], None], workers: int) -> None:
        self.setup_of_rule, self.workers = setup, workers

    def setup(self, worker: Any) -> None:
        """Dask's hook: the rule's setup with the cluster's worker count."""
        self.setup_of_rule(self.workers)


def dask_env_var(key: str) -> str:
    """Dask's environment variable for a config key: ``a.b-c`` -> ``DASK_A__B_C``."""
    return "DASK_" + key.upper().replace(".", "__").replace("-", "_")


def _fresh_offload_pool() -> None:
    """In a forked child: replace Dask's offload thread pool, whose thread did not survive the fork."""
    utils = sys.modules.get("distributed.utils")
    if utils is not None:
        utils._offload_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="Dask-Offload")


os.register_at_fork(after_in_child=_fresh_offload_pool)


class _ReportedErrors(logging.Filter):
    """Drops a worker's "Compute Failed" record (with its traceback) for an error the client reports as one
    line (an :class:`~pipeline.core.errors.DeepsentError`); any other failure is still logged in full."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Compute Failed") and any(f"{name}(" in message for name in _reported()))


def _reported() -> set[str]:
    """Names of :class:`DeepsentError` and every subclass of it."""
    names, todo = set(), [DeepsentError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return names


@contextmanager
def dask_client(settings: Settings, connect_timeout_s: float = 30.0, rule: WorkerRule = WorkerRule()) -> Iterator["Client"]:
    """A distributed Client for the duration of the block; a local cluster (its workers started as ``rule`` says) is
    shut down afterwards; a remote cluster keeps its own workers."""
    from dask.distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # its INFO chatter would drown the stage's logs
    worker_log = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _ReportedErrors) for f in worker_log.filters):
        worker_log.addFilter(_ReportedErrors())  # inherited by the forked local workers

    if settings.dask_address:
        try:
            client = Client(settings.dask_address, timeout=connect_timeout_s, set_as_default=False)
        except OSError as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {settings.dask_address} within {connect_timeout_s:.0f} s "
                              f"({exc}); start it or fix DEEPSENT_DASK_ADDRESS") from None
        log.info("connected to Dask scheduler %s", settings.dask_address)
        try:
            yield client
        finally:
            client.close()
        return
    if settings.dask_workers < 1:
        raise ConfigError(f"DEEPSENT_DASK_WORKERS must be >= 1, got {settings.dask_workers}")
    local_config: dict[str, object] = {"distributed.worker.multiprocessing-method": "fork" if rule.forks else "spawn"}
    local_config.update({key: value for key, value in LOCAL_OVERRIDES.items() if dask_env_var(key) not in os.environ})
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
                if rule.setup is not None:
                    client.register_plugin(_WorkerSetup(rule.setup, settings.dask_workers))
                yield client
        finally:
            cluster.close()
