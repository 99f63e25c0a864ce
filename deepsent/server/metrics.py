"""What ``deepsent serve`` counts for ``/metrics`` (Prometheus text, through prometheus_client, a registry of its own).

Requests by route and status, errors by kind (``internal``, ``timeout``, ``overloaded``), a latency histogram per
route, the requests in flight, the queries of each batch searched and each search's wait for its batch, whether an
index is loaded, the model and build served (an info metric), the swaps done and refused, the watcher's failed polls,
the bytes of the BM25 cache, the connections open and those refused.
"""
from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

#: Paths counted by name; any other path counts as ``other`` (a scanner's paths must not grow the label set).
ROUTES = ("/", "/search", "/healthz", "/readyz", "/metrics", "/docs", "/openapi.json")
#: Latency buckets in seconds: a search of the small index takes milliseconds, a large batch up to the timeout.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Queries per batch: one request alone, a few gathered, a POST's batch of queries.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
#: Seconds a search waits in the queue for its batch: up to the gathering wait (at most 50 ms), then behind others.
WAIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServeMetrics:
    """The server's counters, gauges and histogram, in one registry that :meth:`render` writes out."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("deepsent_serve_requests", "HTTP requests answered, by route and status",
                                ("route", "status"), registry=self.registry)
        self.errors = Counter("deepsent_serve_errors", "requests that failed on the server's side, by kind "
                              "(internal, timeout, overloaded)", ("kind",), registry=self.registry)
        self.latency = Histogram("deepsent_serve_request_seconds", "time from request to response, by route",
                                 ("route",), buckets=BUCKETS, registry=self.registry)
        self.in_flight = Gauge("deepsent_serve_searches_in_flight", "searches admitted and not finished",
                               registry=self.registry)
        self.batch_queries = Histogram("deepsent_serve_batch_queries", "queries searched together in one batch "
                                       "(their requests' queries, encoded in shared passes)", buckets=BATCH_BUCKETS,
                                       registry=self.registry)
        self.batch_wait = Histogram("deepsent_serve_batch_wait_seconds", "time a search waited in the queue before "
                                    "its batch began", buckets=WAIT_BUCKETS, registry=self.registry)
        self.ready = Gauge("deepsent_serve_ready", "1 once an index is loaded and served", registry=self.registry)
        self.served = Info("deepsent_serve_model", "the model version and index build served", registry=self.registry)
        self.swaps = Counter("deepsent_serve_swaps", "index swaps done (a new version or build switched in)",
                             registry=self.registry)
        self.refused = Counter("deepsent_serve_swaps_refused", "new versions or builds refused (failed their checks)",
                               registry=self.registry)
        self.bm25_cache = Gauge("deepsent_serve_bm25_cache_bytes", "bytes the served index's BM25 cache of recent "
                                "queries holds (bounded by --bm25-cache-mb)", registry=self.registry)
        self.connections = Gauge("deepsent_serve_connections_open", "HTTP connections open", registry=self.registry)
        self.connections_refused = Counter("deepsent_serve_connections_refused", "connections the HTTP layer refused "
                                           "or closed, by reason (over_cap, idle, header_timeout, too_large, "
                                           "malformed)", ("reason",), registry=self.registry)
        self.poll_errors = Counter("deepsent_serve_poll_errors", "polls of the registry or current.json that failed",
                                   registry=self.registry)

    @staticmethod
    def route(path: str) -> str:
        """The route label of ``path``."""
        return path if path in ROUTES else "other"

    def answered(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def batched(self, queries: int, waits: list[float]) -> None:
        """Count one batch: its queries, and how long each of its searches waited for it."""
        self.batch_queries.observe(queries)
        for seconds in waits:
            self.batch_wait.observe(seconds)

    def now_serving(self, facts: dict[str, Any]) -> None:
        """Name the model and build served (every value as text)."""
        self.served.info({key: str(value) for key, value in facts.items()})
        self.ready.set(1)

    def render(self) -> bytes:
        """Every metric in Prometheus' text format."""
        return generate_latest(self.registry)
