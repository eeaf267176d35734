"""The request body size limit (`request.max.bytes`), enforced before the body is parsed.

A declared Content-Length over the limit is refused at once; a chunked body is counted as it
arrives and refused when it passes the limit, so no oversized body is ever held in memory.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response
from service.errors import PayloadTooLarge


class BodySizeLimit:
    """ASGI middleware: refuses bodies over request.max.bytes before they are read whole."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit()
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            request = Request(scope)
            error = PayloadTooLarge(_too_large(int(declared), limit))
            await error_response(request, error)(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(_too_large(received, limit))
            return message

        await self.app(scope, counted, send)


def _too_large(size: int, limit: int) -> str:
    return f"the request body ({size} bytes or more) exceeds request.max.bytes = {limit}"
