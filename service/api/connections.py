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
peer that does not answer one within PING_SECONDS is gone; how many are open:
service.api.sockets).

Out of file descriptors all the same, asyncio would log a traceback for every accept() that
failed, thousands a second: AcceptErrors, the serving loop's exception handler (installed by
the app's start, `quiet_accept_errors`), says it once per burst.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.api.payload import QUESTION_BYTES

log = logging.getLogger(__name__)

HEADER_SECONDS = 10.0
PING_SECONDS = 20.0
# an accept() that failed for want of descriptors is said once, then once more when a burst
# of them has been over for this long
ACCEPT_BURST_SECONDS = 60.0
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


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


class AcceptErrors:
    """The event loop's exception handler, which says once per burst that connections cannot
    be accepted for want of file descriptors. asyncio reports each accept() that failed
    (EMFILE, ENFILE...) with a traceback, up to the listening socket's backlog (2048) at a
    time and again every second: 149,461 lines in 15 s (issue 81). Here the first of a burst
    is one line, and its end (ACCEPT_BURST_SECONDS without one) another, with their count;
    every other report goes to the handler it replaced (asyncio's own by default)."""

    def __init__(
        self,
        previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.previous = previous
        self.clock = clock
        self.failed = 0  # accepts failed in the burst going on (0: none)
        self.last = 0.0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        accepting = str(context.get("message", "")).startswith("socket.accept()")
        if not (accepting and isinstance(error, OSError) and error.errno in OUT_OF_RESOURCES):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.last = self.clock()
        self.failed += 1
        if self.failed > 1:
            return
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        log.error(
            "cannot accept connections: %s (the open-file limit, ulimit -n, is %s); said once "
            "until connections are accepted again",
            error.strerror or error,  # type: ignore[union-attr]
            "none" if soft == resource.RLIM_INFINITY else soft,
        )
        loop.call_later(ACCEPT_BURST_SECONDS, self.ended, loop)

    def ended(self, loop: asyncio.AbstractEventLoop) -> None:
        """The burst's end, said once it has been quiet for ACCEPT_BURST_SECONDS."""
        quiet = self.clock() - self.last
        if quiet < ACCEPT_BURST_SECONDS:
            loop.call_later(ACCEPT_BURST_SECONDS - quiet, self.ended, loop)
            return
        log.warning(
            "accepting connections again; %d accepts had failed for want of file descriptors",
            self.failed,
        )
        self.failed = 0


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """AcceptErrors on `loop` (once: a second app on the same loop keeps it)."""
    current = loop.get_exception_handler()
    if not isinstance(current, AcceptErrors):
        loop.set_exception_handler(AcceptErrors(current))
