"""The ASGI layer every request of ``deepsent serve`` passes first: the token, the body's size, the count, the 500.

:class:`Guard` answers 401 when a token is required and the request does not carry it (``Authorization: Bearer
<token>``, compared in constant time, never logged), 413 for a body over the bound (read at most that far), 408 for
a body that has not all arrived within the request timeout (a slow sender holds no slot for longer), counts
every answer by route and status with its latency, and turns an unexpected error into a one-line JSON 500 (its
message logged on one line, the traceback only with ``-v``; :func:`internal_error` is the app's own handler of it,
which answers before any middleware sees the error): no traceback ever reaches a client, nor uvicorn's log.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any, Awaitable, Callable

from deepsent.server.metrics import ServeMetrics

log = logging.getLogger(__name__)

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

#: What a client is told of an unexpected error.
INTERNAL = "internal error: the request failed on the server (its log says why)"
#: Methods whose body the guard reads (within the bound) before the app sees it.
WITH_BODY = ("POST", "PUT", "PATCH")
#: What :meth:`Guard._timed_body` returns for a body that did not arrive in time.
SLOW = object()


class Guard:
    """Token, body bound, counting and the last-resort 500 around the app."""

    def __init__(self, app: App, metrics: ServeMetrics, token: str | None, max_body_bytes: int,
                 body_timeout_s: float) -> None:
        self.app, self.metrics, self.max_body_bytes, self.body_timeout_s = app, metrics, max_body_bytes, body_timeout_s
        self._token = None if token is None else f"bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Answer one request (other ASGI events pass through)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, route = time.perf_counter(), self.metrics.route(scope["path"])
        sent: dict[str, int] = {}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
            await send(message)

        try:
            if self._token is not None and not self._carries_token(scope):
                await reply(sending, 401, "this server requires its token: send Authorization: Bearer "
                            "<DEEPSENT_SERVE_TOKEN>", {"www-authenticate": "Bearer"})
            elif scope["method"] not in WITH_BODY:
                await self.app(scope, receive, sending)
            elif (body := await self._timed_body(scope, receive)) is None:
                await reply(sending, 413, f"the request body is over {self.max_body_bytes:,} bytes, the most read")
            elif body is SLOW:
                await reply(sending, 408, f"the request body did not arrive within {self.body_timeout_s:g} s",
                            {"connection": "close"})
            else:
                await self.app(scope, replay(body, receive), sending)
        except Exception as exc:  # noqa: BLE001 - the last resort: one line to the log and to the client
            if "status" not in sent:  # (else the app's handler answered and logged it: see internal_error)
                failed(self.metrics, scope["method"], route, exc)
                await reply(sending, 500, INTERNAL)
        finally:
            self.metrics.answered(route, sent.get("status", 500), time.perf_counter() - started)

    def _carries_token(self, scope: dict[str, Any]) -> bool:
        """Whether the request's Authorization header is ``Bearer <token>`` (scheme in any case)."""
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, credential = given.partition(b" ")
        return hmac.compare_digest(scheme.lower() + b" " + credential.strip(), self._token or b"")

    async def _timed_body(self, scope: dict[str, Any], receive: Receive) -> Any:
        """:meth:`_body`, or :data:`SLOW` when it has not all arrived within :attr:`body_timeout_s`."""
        try:
            return await asyncio.wait_for(self._body(scope, receive), self.body_timeout_s)
        except TimeoutError:
            return SLOW

    async def _body(self, scope: dict[str, Any], receive: Receive) -> bytes | None:
        """The request body, or None once it is known to be over :attr:`max_body_bytes` (read no further)."""
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: the app reads an empty body and answers no one
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def failed(metrics: ServeMetrics, method: str, route: str, exc: BaseException) -> None:
    """Count an unexpected error and log it on one line (its traceback only at DEBUG, with ``-v``)."""
    metrics.errors.labels("internal").inc()
    log.error("%s %s failed: %s: %s", method, route, type(exc).__name__, " ".join(str(exc).split()))
    log.debug("the failure's traceback", exc_info=exc)


def internal_error(metrics: ServeMetrics) -> Callable[[Any, Exception], Awaitable[Any]]:
    """The app's handler of an unexpected error (Starlette answers it before any middleware could): counted, logged
    on one line, answered with a one-line JSON 500."""
    from fastapi.responses import JSONResponse

    async def handle(request: Any, exc: Exception) -> JSONResponse:
        failed(metrics, request.method, metrics.route(request.url.path), exc)
        return JSONResponse({"error": INTERNAL}, 500)

    return handle


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app ``body`` (already read) once, then the connection's next events."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


async def reply(send: Send, status: int, error: str, headers: dict[str, str] | None = None) -> None:
    """Send ``{"error": error}`` with ``status`` (and ``headers``)."""
    body = json.dumps({"error": error}).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    fields += [(name.encode(), value.encode()) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})
