"""The request body size limit (`request.max.bytes`; `jobs.max.bytes` for the job
submissions, which carry up to 100,000 documents), enforced before the body is parsed, and its
pace (`request.body.timeout`).

A declared Content-Length over the limit is refused at once; a chunked body is counted as it
arrives and refused when it passes the limit, so no oversized body is ever held in memory. A
body that pauses longer than the timeout between two parts is a 408: a client sending a byte a
minute cannot hold a connection and a worker's attention for ever; nor can one sending a byte
every few seconds: the whole body must arrive within `request.timeout` (or, for a larger
limit, as long as its largest body takes at 64 KiB/s: a job's submission).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response
from service.errors import BodyTimeout, PayloadTooLarge

SLOWEST_BYTES_PER_SECOND = 65536  # a job's 64 MiB body may take 17 minutes, no more


class BodySizeLimit:
    """ASGI middleware: refuses bodies over the limit of their path (`limit(path)`: bytes, and
    the key that sets them) before they are read whole, and bodies that stop arriving for
    request.body.timeout."""

    def __init__(
        self,
        app: ASGIApp,
        limit: Callable[[str], tuple[int, str]],
        pause: Callable[[], float] = lambda: 30.0,
        whole: Callable[[], float] = lambda: 300.0,
    ) -> None:
        self.app = app
        self.limit = limit
        self.pause = pause
        self.whole = whole

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, key = self.limit(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            request = Request(scope)
            error = PayloadTooLarge(_too_large(int(declared), limit, key))
            await error_response(request, error)(scope, receive, send)
            return
        received = 0
        complete = False
        # the whole body within request.timeout, or the time its largest takes at 64 KiB/s
        pause, whole = self.pause(), max(self.whole(), limit / SLOWEST_BYTES_PER_SECOND)
        ends = time.monotonic() + whole

        async def counted() -> Message:
            nonlocal received, complete
            if complete:  # after the body: the wait for a disconnect is not timed
                return await receive()
            left = ends - time.monotonic()
            try:
                with anyio.fail_after(max(0.0, min(pause, left))):
                    message = await receive()
            except TimeoutError:
                if left <= pause:
                    raise BodyTimeout(
                        f"the request body took longer than {whole:g}s (request.timeout, or "
                        f"its size limit at 64 KiB/s) to arrive, after {received} bytes"
                    ) from None
                raise BodyTimeout(
                    f"the request body stopped arriving for {pause:g}s "
                    f"(request.body.timeout), after {received} bytes"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if received > limit:
                    raise PayloadTooLarge(_too_large(received, limit, key))
            return message

        await self.app(scope, counted, send)


def _too_large(size: int, limit: int, key: str) -> str:
    return f"the request body ({size} bytes or more) exceeds {key} = {limit}"
