"""The bounds of ``deepsent serve``: what one request may ask, how many run at once, and how long one may take.

:func:`checked_search` reads a request's queries, k and mode within :class:`Limits` or raises :class:`BadRequest`
(one line, a 4xx). :class:`Gate` admits at most ``max_in_flight`` searches at once (one more is answered 503 with
Retry-After at once, never queued) and answers 504 when one takes longer than ``timeout_s``; a search that timed out
keeps its place until it ends, so the work in progress stays bounded. :class:`Connections`: how many connections are
held, and for how long without a whole request line and headers.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
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
    """At most ``max_in_flight`` searches at once, each answered within ``timeout_s`` (a pool of as many threads)."""

    def __init__(self, limits: Limits, in_flight: Any) -> None:
        self.limits, self.in_flight = limits, in_flight  # in_flight: a gauge with inc() and dec()
        self._slots = threading.BoundedSemaphore(limits.max_in_flight)
        self._pool = ThreadPoolExecutor(limits.max_in_flight, thread_name_prefix="deepsent-search")

    async def run(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)`` on a search thread: :class:`Overloaded` when no slot is free, :class:`TimedOut` past the
        timeout (the work then ends in the background, holding its slot until it does)."""
        if not self._slots.acquire(blocking=False):
            raise Overloaded()
        self.in_flight.inc()
        try:
            future = self._pool.submit(work, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.timeout_s)
        except asyncio.TimeoutError:
            raise TimedOut() from None

    def close(self) -> None:
        """Wait for the searches still running, then end the threads."""
        self._pool.shutdown(wait=True)

    def _release(self, _: Any) -> None:
        self.in_flight.dec()
        self._slots.release()
