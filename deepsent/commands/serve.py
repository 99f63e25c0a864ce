"""``deepsent serve``: the champion's index over HTTP, loaded once, swapped in place when a promotion or build lands."""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
from typing import Any, Mapping

from encoders.model.ranker_registry import CHAMPION_URI as CHAMPION
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError

log = logging.getLogger(__name__)

#: The environment variable holding the token every request must carry (required beyond loopback).
TOKEN_ENV = "DEEPSENT_SERVE_TOKEN"
#: The shortest token accepted.
MIN_TOKEN_CHARS = 16
#: Connections the kernel holds before the server accepts them (uvicorn's default).
BACKLOG = 2048
#: The most connections ``--max-connections`` may allow, and the file descriptors kept for everything else.
MAX_CONNECTIONS, SPARE_FILES = 60_000, 256
#: The largest BM25 cache ``--bm25-cache-mb`` may ask for.
MAX_CACHE_MB = 65_536
#: How long a stop waits for the requests in flight beyond the request timeout, in seconds.
DRAIN_MARGIN_S = 5.0


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``serve`` to the CLI."""
    from deepsent.server.limits import (BATCH_QUERIES, BATCH_WAIT_MS, CACHE_BYTES, KEEP_ALIVE_S, MAX_BATCH_QUERIES,
                                        MAX_BATCH_WAIT_MS, MAX_K, MAX_QUERY_CHARS, Connections, Limits)

    defaults, connections = Limits(), Connections()
    sv = subparsers.add_parser(
        "serve", parents=[common], help="answer searches over HTTP from the champion's index, swapped in place",
        description="Load the model's live index once and answer GET /search?q=&k=&mode=, POST /search "
        "({\"queries\": [...], \"k\": .., \"mode\": ..}) and the search page at /, with /healthz, /readyz, /metrics "
        "(Prometheus) and the OpenAPI docs (/docs). A promotion (the alias names another version) or a new build "
        "(current.json) is loaded beside the one served and switched in without a dropped request; a build that "
        f"fails its checks is refused and the old one keeps serving. Queries of at most {MAX_QUERY_CHARS} "
        f"characters, k from 1 to {MAX_K:,}. Concurrent requests' queries are searched in batches (one encoding "
        "pass for the short ones), a query's answer the same bytes as alone. Binding beyond loopback needs a token in "
        f"{TOKEN_ENV}; when it is set, every request must send Authorization: Bearer <token>. SIGTERM stops it after "
        "the requests in flight.",
    )
    sv.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; any other "
                    f"needs {TOKEN_ENV})")
    sv.add_argument("--port", type=v.number(int, "a port from 0 to 65,535", 0, 65_535), default=8000,
                    help="the port (default 8000; 0 picks a free one, named in the log)")
    sv.add_argument("--model-uri", default=CHAMPION, help=f"the model whose index to serve (default {CHAMPION})")
    sv.add_argument("--poll-seconds", type=v.seconds(), default=2.0,
                    help="how often to look for a new version or build (default 2)")
    sv.add_argument("--max-in-flight", type=v.up_to(1_024), default=defaults.max_in_flight,
                    help=f"searches at once; one more is answered 503 (default {defaults.max_in_flight})")
    sv.add_argument("--timeout-seconds", type=v.seconds(), default=defaults.timeout_s,
                    help=f"the longest a search may take before a 504 (default {defaults.timeout_s:g})")
    sv.add_argument("--max-batch", type=v.up_to(1_000), default=defaults.max_batch,
                    help=f"queries in one POST /search (default {defaults.max_batch})")
    sv.add_argument("--max-connections", type=v.up_to(MAX_CONNECTIONS), default=connections.max_connections,
                    help="open connections at once; one more is answered 503 and closed "
                    f"(default {connections.max_connections})")
    sv.add_argument("--header-timeout-seconds", type=v.seconds(), default=connections.header_timeout_s,
                    help="how long a connection may take to send a request's line and headers before it is closed; "
                    f"one idle after an answer is closed after {KEEP_ALIVE_S} s "
                    f"(default {connections.header_timeout_s:g})")
    sv.add_argument("--bm25-cache-mb", type=v.number(float, f"megabytes from 0 to {MAX_CACHE_MB:,}", 0, MAX_CACHE_MB),
                    default=CACHE_BYTES / 2**20, help="the most memory the BM25 scores of recent queries take "
                    f"(MiB, default {CACHE_BYTES / 2**20:g}; 0 keeps none)")
    sv.add_argument("--batch-wait-ms", type=v.number(float, f"milliseconds from 0 to {MAX_BATCH_WAIT_MS:g}", 0,
                                                     MAX_BATCH_WAIT_MS), default=BATCH_WAIT_MS,
                    help="milliseconds a search waits for other requests' queries to share its batch (default "
                    f"{BATCH_WAIT_MS:g}; 0: only those queued meanwhile)")
    sv.add_argument("--batch-max", type=v.up_to(MAX_BATCH_QUERIES, "a number of queries"), default=BATCH_QUERIES,
                    help="the most queries one batch searches (a POST with more is a batch of its own; default "
                    f"{BATCH_QUERIES})")
    sv.add_argument("--threads", type=v.up_to(v.CORES, "a thread count"), default=1,
                    help="torch threads per batch (default 1); batches run on cores / threads threads at once")
    sv.set_defaults(handler=run_serve, reads_only=lambda args: True)


def checked_token(host: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The token requests must carry: :data:`TOKEN_ENV` when set (required when ``host`` is not loopback)."""
    token = env.get(TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        raise ConfigError(f"--host {host} listens beyond loopback: set {TOKEN_ENV} (at least {MIN_TOKEN_CHARS} "
                          "characters) so that every request must carry it, or serve on 127.0.0.1")
    if token is not None and (len(token) < MIN_TOKEN_CHARS or token != token.strip() or not token.isprintable()):
        raise ConfigError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} printable characters, no surrounding space")
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port`` (one-line error when it cannot): connections wait in its backlog
    until the server accepts them."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def allow_files(connections: int) -> None:
    """Raise this process's open-file limit to hold ``connections`` and :data:`SPARE_FILES` (one line when the hard
    limit is lower)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ConfigError(f"--max-connections {connections:,} needs {needed:,} open files; this process may open "
                              f"{hard:,} (ulimit -n): ask for at most {max(hard - SPARE_FILES, 1):,}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def run_serve(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Serve until SIGTERM or SIGINT; the requests in flight are answered first."""
    token = checked_token(args.host)  # before anything loads: a refusal is immediate
    import torch
    import uvicorn

    from deepsent.server.app import build_app
    from deepsent.server.limits import Batching, Connections, Limits
    from deepsent.server.metrics import ServeMetrics
    from deepsent.server.protocol import uvicorn_settings
    from deepsent.server.watcher import Watcher

    limits = Limits(max_batch=args.max_batch, max_in_flight=args.max_in_flight, timeout_s=args.timeout_seconds)
    metrics = ServeMetrics()
    connections = Connections(args.max_connections, args.header_timeout_seconds,
                              lambda reason: metrics.connections_refused.labels(reason).inc())
    allow_files(connections.max_connections)
    sock = listening_socket(args.host, args.port)
    torch.set_num_threads(args.threads)
    server: uvicorn.Server | None = None

    def stop_serving() -> None:
        if server is not None:
            server.should_exit = True

    watcher = Watcher(settings, args.model_uri, args.poll_seconds, metrics, stop_serving,
                      cache_bytes=int(args.bm25_cache_mb * 2**20))
    batching = Batching(args.batch_wait_ms / 1000, args.batch_max, workers=max(1, v.CORES // args.threads))
    app, batcher = build_app(watcher, limits, metrics, token, batching)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False,
                            **uvicorn_settings(connections),
                            timeout_graceful_shutdown=int(limits.timeout_s + DRAIN_MARGIN_S))
    server = uvicorn.Server(config)
    metrics.connections.set_function(lambda state=server.server_state: len(state.connections))
    host, port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d%s; loading %s", f"[{host}]" if ":" in host else host, port,
             " (token required)" if token else "", args.model_uri)
    watcher.start()
    stops: list[int] = []

    def stopped(number: int, _: Any) -> None:  # uvicorn hands the signal back here once it has stopped
        stops.append(number)
        stop_serving()

    kept = {sig: signal.signal(sig, stopped) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])  # uvicorn handles SIGTERM/SIGINT: stop accepting, answer what is in flight
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
        watcher.stop()
        batcher.close()
        sock.close()
    if watcher.start_error is not None:
        raise watcher.start_error
    served = watcher.current
    how = f"stopped by {signal.Signals(stops[0]).name}" if stops else "stopped"
    return {"stopped_by": signal.Signals(stops[0]).name if stops else None, "url": f"http://{host}:{port}",
            "version": None if served is None else served.index.version,
            "build": None if served is None else served.build,
            "summary": f"deepsent serve {how} after answering the requests in flight"}
