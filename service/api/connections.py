"""The HTTP connections `solr-rag serve` accepts: uvicorn's h11 protocol, with a bound on how
long a connection may take to send its request line and headers.

uvicorn closes an idle keep-alive connection after its keep-alive timeout, but a connection
that never finishes its first request's headers (one that sends nothing, or a header a
minute, "Slowloris") stays open for ever, each holding a socket and a file descriptor. Here a
connection must complete a request's headers within HEADER_SECONDS of opening, or of the first
byte of its next request; otherwise it is closed. The body has its own bound
(request.body.timeout, service.api.limits). A connection upgraded to a WebSocket has
completed its headers: the timer ends there, and the socket's own bounds apply
(`SERVER_OPTIONS`: a message is at most the app's 512 KiB, refused by the protocol before it
is read whole; no compression, so nothing inflates past it; a ping every PING_SECONDS, and a
peer that does not answer one within PING_SECONDS is gone).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.api.payload import QUESTION_BYTES

HEADER_SECONDS = 10.0
PING_SECONDS = 20.0


class BoundedHeaders(H11Protocol):
    """uvicorn's h11 protocol; a request's headers must arrive within HEADER_SECONDS."""

    _headers_timer: asyncio.TimerHandle | None = None
    _cycle_seen: object = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_timer()

    def data_received(self, data: bytes) -> None:
        between_requests = self.cycle is None or self.cycle.response_complete
        if self._headers_timer is None and between_requests:
            self._start_timer()  # the first bytes of the next request on this connection
        super().data_received(data)
        if self.cycle is not None and self.cycle is not self._cycle_seen:
            self._cycle_seen = self.cycle  # a new request: its headers are complete
            self._stop_timer()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._stop_timer()  # the headers are complete; the socket is another protocol's now
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def _start_timer(self) -> None:
        self._stop_timer()
        self._headers_timer = self.loop.call_later(HEADER_SECONDS, self._too_slow)

    def _stop_timer(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _too_slow(self) -> None:
        self._headers_timer = None
        if not self.transport.is_closing():
            self.transport.close()


# what every server of the service runs with (`solr-rag serve`, and the tests' servers)
SERVER_OPTIONS: dict[str, object] = {
    "http": BoundedHeaders,
    "ws_max_size": QUESTION_BYTES,  # Datafari 7's socket takes what a question body may hold
    "ws_per_message_deflate": False,  # a compressed message would inflate before any check
    "ws_ping_interval": PING_SECONDS,
    "ws_ping_timeout": PING_SECONDS,
}
