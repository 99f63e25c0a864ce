"""Dynamic batching of ``deepsent serve``'s searches: the queries of concurrent requests searched together.

A request's search (an :class:`~deepsent.server.loaded.Asked`) joins a queue (:meth:`Batcher.submit` returns its
future). Worker threads take turns gathering: the one gathering takes the oldest search and those queued after it
against the same loaded index, until they hold ``max_queries`` queries or ``wait_s`` has passed since the oldest
arrived (at once when closing), then searches them in one :meth:`~deepsent.server.loaded.Loaded.search_many` (their
queries encoded in shared passes, a query's answer the same bytes as alone) while the next worker gathers. A batch
never mixes two loaded indexes (a swap between two requests); a search whose request gave up (its future cancelled,
past the timeout) before its batch began is dropped; a batch that fails is searched again one request at a time, so
a request that breaks fails alone. ``observe`` is told each batch's queries and each search's wait in the queue.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from deepsent.server.limits import Batching
from deepsent.server.loaded import Asked, Loaded


@dataclass(frozen=True)
class Pending:
    """A search waiting for its batch: where it is searched, what it asks, its future and when it arrived."""

    loaded: Loaded
    asked: Asked
    future: Future
    arrived: float


class Batcher:
    """Searches gathered into batches of one loaded index each, run by ``batching.workers`` threads."""

    def __init__(self, batching: Batching, observe: Callable[[int, list[float]], None] = lambda size, waits: None
                 ) -> None:
        self.batching, self._observe = batching, observe
        self._queue: deque[Pending] = deque()
        self._ready = threading.Condition()  # guards the queue and the closed flag; told of every arrival
        self._gathering = threading.Lock()  # one worker gathers at a time, the others search
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"deepsent-batch-{n}", daemon=True)
                         for n in range(batching.workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, loaded: Loaded, asked: Asked) -> Future:
        """The future answer of ``asked`` from ``loaded``, searched in one of the next batches (cancel it to drop
        the search while it waits; RuntimeError once closed)."""
        pending = Pending(loaded, asked, Future(), time.perf_counter())
        with self._ready:
            if self._closed:
                raise RuntimeError("the batcher is closed: the server is stopping")
            self._queue.append(pending)
            self._ready.notify_all()
        return pending.future

    def close(self) -> None:
        """Search what is queued without waiting for company, then end the workers."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._search(batch)

    def _next_batch(self) -> list[Pending] | None:
        """The next batch to search (None once closed and drained): gathered for at most ``wait_s`` after its oldest
        search arrived, or until it holds ``max_queries`` queries."""
        with self._gathering, self._ready:
            while True:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return None
                oldest = self._queue[0]
                deadline = oldest.arrived + self.batching.wait_s
                while (not self._closed and self._queries(oldest.loaded) < self.batching.max_queries
                       and (left := deadline - time.perf_counter()) > 0):
                    self._ready.wait(left)
                batch = self._take(oldest.loaded)
                if batch:  # else every search taken had given up: gather again
                    return batch

    def _queries(self, loaded: Loaded) -> int:
        """The queries queued against ``loaded``."""
        return sum(len(pending.asked.queries) for pending in self._queue if pending.loaded is loaded)

    def _take(self, loaded: Loaded) -> list[Pending]:
        """The oldest searches of ``loaded`` while they fit in ``max_queries`` (the first always), out of the queue;
        those whose request gave up are dropped."""
        taken: list[Pending] = []
        queries = 0
        for pending in list(self._queue):
            if pending.loaded is not loaded:
                continue
            size = len(pending.asked.queries)
            if taken and queries + size > self.batching.max_queries:
                break
            self._queue.remove(pending)
            taken.append(pending)
            queries += size
        return [pending for pending in taken if pending.future.set_running_or_notify_cancel()]

    def _search(self, batch: list[Pending]) -> None:
        """Search ``batch`` in one pass and hand each request its answer (one request at a time when the batch fails,
        so a request that breaks fails alone)."""
        began = time.perf_counter()
        self._observe(sum(len(pending.asked.queries) for pending in batch), [began - p.arrived for p in batch])
        try:
            answers = batch[0].loaded.search_many([pending.asked for pending in batch])
        except BaseException as exc:  # noqa: BLE001 - handed to the requests, whose handlers answer it
            if len(batch) == 1:
                batch[0].future.set_exception(exc)
            else:
                for pending in batch:
                    _answer_alone(pending)
            return
        for pending, answer in zip(batch, answers):
            pending.future.set_result(answer)


def _answer_alone(pending: Pending) -> None:
    """``pending``'s future given its answer searched alone, or the exception its search raises."""
    try:
        pending.future.set_result(pending.loaded.search_many([pending.asked])[0])
    except BaseException as exc:  # noqa: BLE001 - handed to the request
        pending.future.set_exception(exc)
