"""The HTTP connections of ``deepsent serve``: uvicorn's h11 protocol with bounds on what a client holds open.

:func:`protocol_class` gives uvicorn (``http=``) a subclass of its h11 protocol that refuses a connection over
:attr:`Connections.max_connections` at once (a JSON 503, then closed), closes a connection whose request line and
headers have not all arrived ``header_timeout_s`` after it opened or after its last answer (a JSON 408 when part of
a request came, else closed silently: an idle connection), and answers a request h11 cannot read (a request line or
headers over :data:`MAX_HEAD_BYTES`, a raw space or non-ASCII byte in the request line, TLS bytes) with one JSON line
instead of uvicorn's plain text; each is told to :attr:`Connections.refused` by reason. The size bound itself is
h11's (``h11_max_incomplete_event_size``); the idle time after an answer is uvicorn's ``timeout_keep_alive``. An
unknown method reaches the app, which answers 405 or 404.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from deepsent.server.limits import KEEP_ALIVE_S, MAX_HEAD_BYTES, Connections

def json_response(status: int, reason: bytes, error: str) -> bytes:
    """A whole HTTP/1.1 response of one JSON line that closes the connection (for answers outside h11's cycle)."""
    body = json.dumps({"error": error}).encode()
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (status, reason, len(body))) + body


def protocol_class(bounds: Connections) -> type[H11Protocol]:
    """uvicorn's h11 protocol bounded by ``bounds`` (a class: uvicorn makes one per connection)."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"bounds": bounds})


class BoundedH11Protocol(H11Protocol):
    """One connection: refused over the cap, closed when its headers are late, every h11 refusal one JSON line."""

    bounds = Connections()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse the connection over the cap (503), else wait at most the header timeout for its request."""
        over = len(self.server_state.connections) >= self.bounds.max_connections
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        if over:
            transport.write(json_response(503, b"Service Unavailable", f"over the limit of "
                                          f"{self.bounds.max_connections:,} connections; try again"))
            transport.close()
            self.bounds.refused("over_cap")
            return
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the header timer, then as uvicorn does."""
        self._stop_head_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """h11's events as uvicorn handles them; the header timer stops once a request's line and headers are in."""
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        """As uvicorn does (which arms its keep-alive timeout), and the next request's header timeout."""
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()

    def send_400_response(self, msg: str) -> None:
        """A JSON answer to a request h11 could not read: 431 over :data:`MAX_HEAD_BYTES`, else 400."""
        if self.transport.is_closing():
            return
        pending = len(self.conn.trailing_data[0])
        self.bounds.refused("too_large" if pending > MAX_HEAD_BYTES else "malformed")
        if pending > MAX_HEAD_BYTES:
            answer = json_response(431, b"Request Header Fields Too Large", f"the request line and headers are over "
                                   f"{MAX_HEAD_BYTES:,} bytes, the most read")
        else:
            answer = json_response(400, b"Bad Request", "malformed request: not HTTP/1.1 (a raw space or non-ASCII "
                                   "byte in the request line, or TLS sent to this plain-HTTP port?)")
        self.transport.write(answer)
        self.transport.close()

    def _await_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.bounds.header_timeout_s, self._head_late)

    def _stop_head_timer(self) -> None:
        if getattr(self, "_head_timer", None) is not None:
            self._head_timer.cancel()  # type: ignore[union-attr]
            self._head_timer = None

    def _head_late(self) -> None:
        """The header timeout passed with the request line or headers unfinished: 408 if some came, then close."""
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.bounds.refused("header_timeout" if self.conn.trailing_data[0] else "idle")
        if self.conn.trailing_data[0]:
            self.transport.write(json_response(408, b"Request Timeout", f"the request line and headers took longer "
                                               f"than {self.bounds.header_timeout_s:g} s"))
        self.transport.close()


def uvicorn_settings(bounds: Connections) -> dict[str, Any]:
    """The uvicorn.Config settings that bound connections (the protocol above, h11's size bound, keep-alive)."""
    return {"http": protocol_class(bounds), "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
            "timeout_keep_alive": KEEP_ALIVE_S}
