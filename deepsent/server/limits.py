"""The bounds of ``deepsent serve``: what one request may ask, how many run at once, and how long one may take.

:func:`checked_search` reads a request's queries, k and mode within :class:`Limits` or raises :class:`BadRequest`
(one line, a 4xx). :class:`Gate` admits at most ``max_in_flight`` searches at once (one more is answered 503 with
Retry-After at once, never queued) and answers 504 when one takes longer than ``timeout_s``; a search that timed out
keeps its place until it ends (one still waiting for its batch is dropped), so the work in progress stays bounded.
:class:`Batching`: how concurrent searches are gathered into batches (:mod:`deepsent.server.batcher`).
:class:`Connections`: how many connections are held, and for how long without a whole request line and headers.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

#: The longest query served, in characters and in UTF-8 bytes.
MAX_QUERY_CHARS = 500
MAX_QUERY_BYTES = 1_000
#: The most titles one query may ask for (``k``), and the default.
MAX_K = 1_000
DEFAULT_K = 10
#: What a request body may add beside its queries (the JSON's keys, k and mode), in bytes.
BODY_OVERHEAD = 4_096
#: The seconds a client is told to wait before it tries again (Retry-After of a 503).
RETRY_AFTER_S = 1
#: The most bytes a request line and its headers may take (h11 answers 431 beyond it; a query needs about 3 KB).
MAX_HEAD_BYTES = 16_384
#: Seconds an open connection waits for its next request once it was answered (uvicorn's keep-alive timeout).
KEEP_ALIVE_S = 5
#: The most bytes a served index's BM25 cache of recent queries takes by default (``--bm25-cache-mb``).
CACHE_BYTES = 64 * 2**20
#: How long a search waits for others to share its batch by default, and the longest ``--batch-wait-ms`` allows (ms).
BATCH_WAIT_MS, MAX_BATCH_WAIT_MS = 2.0, 50.0
#: The most queries one batch takes by default (enough to share encoding passes, few enough that a core's worker
#: gets its own batch under load), and the most ``--batch-max`` allows.
BATCH_QUERIES, MAX_BATCH_QUERIES = 4, 256


class BadRequest(Exception):
    """A request the server will not search: its status (4xx) and one line saying why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Overloaded(Exception):
    """Every search slot is taken (503 with Retry-After)."""


class TimedOut(Exception):
    """A search ran past the request timeout (504)."""


@dataclass(frozen=True)
class Limits:
    """How much the server takes on: queries per request, searches at once, seconds per request."""

    max_batch: int = 64
    max_in_flight: int = 32
    timeout_s: float = 5.0

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read: a full batch of the longest queries, each character JSON-escaped."""
        return self.max_batch * (6 * MAX_QUERY_CHARS + 2) + BODY_OVERHEAD


@dataclass(frozen=True)
class Batching:
    """How searches are gathered: the longest one waits for company (0: none, only what queued meanwhile), the most
    queries a batch takes, and how many batches are searched at once."""

    wait_s: float = BATCH_WAIT_MS / 1000
    max_queries: int = BATCH_QUERIES
    workers: int = 1


@dataclass(frozen=True)
class Connections:
    """How many connections the server holds, and how long one may take to send a request's line and headers
    (:mod:`deepsent.server.protocol` holds them to it)."""

    max_connections: int = 512
    header_timeout_s: float = 10.0
    #: Told the reason of every connection the protocol refuses or closes (``/metrics`` counts them).
    refused: Callable[[str], None] = lambda reason: None


def checked_search(queries: list[str], k: int, mode: str | None, modes: tuple[str, ...], limits: Limits,
                   batch: bool = False) -> list[str]:
    """``queries`` stripped, once every query, ``k`` and ``mode`` are within bounds (else :class:`BadRequest`, which
    names a query ``q``, or ``query N`` of a ``batch``)."""
    if not queries:
        raise BadRequest("no queries: give at least one")
    if len(queries) > limits.max_batch:
        raise BadRequest(f"{len(queries):,} queries in one request; at most {limits.max_batch:,} are served at once",
                         413)
    if not 1 <= k <= MAX_K:
        raise BadRequest(f"k {k} is out of range: give 1 to {MAX_K:,}")
    if mode is not None and mode not in modes:
        raise BadRequest(f"mode {mode[:40]!r} is not one of {', '.join(modes)}")
    checked = []
    for number, query in enumerate(queries, 1):
        where = f"query {number}" if batch else "q"
        try:
            size = len(query.encode("utf-8"))
        except UnicodeEncodeError:
            raise BadRequest(f"{where} is not valid text (it holds a lone UTF-16 surrogate)") from None
        if len(query) > MAX_QUERY_CHARS or size > MAX_QUERY_BYTES:
            raise BadRequest(f"{where} is {len(query):,} characters ({size:,} bytes) long; the longest served is "
                             f"{MAX_QUERY_CHARS:,} characters and {MAX_QUERY_BYTES:,} bytes")
        if not query.strip():
            raise BadRequest(f"{where} is empty: give a query with at least one word")
        checked.append(query.strip())
    return checked


class Gate:
    """At most ``max_in_flight`` searches at once, each answered within ``timeout_s``."""

    def __init__(self, limits: Limits, in_flight: Any) -> None:
        self.limits, self.in_flight = limits, in_flight  # in_flight: a gauge with inc() and dec()
        self._slots = threading.BoundedSemaphore(limits.max_in_flight)

    async def run(self, submit: Callable[[], Future]) -> Any:
        """The result of the future ``submit()`` starts (a search handed to the batcher): :class:`Overloaded` when
        no slot is free, :class:`TimedOut` past the timeout (the future is then cancelled: a search still queued is
        dropped, one running ends in the background, holding its slot until it does)."""
        if not self._slots.acquire(blocking=False):
            raise Overloaded()
        self.in_flight.inc()
        try:
            future = submit()
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.timeout_s)
        except asyncio.TimeoutError:
            raise TimedOut() from None

    def _release(self, _: Any) -> None:
        self.in_flight.dec()
        self._slots.release()
