"""The router's trailing-slash redirect (`/ai/rag/` -> `/ai/rag`) names no host.

Starlette builds that redirect's Location from the request's own Host header, so a client, or a
cache in front of the service, could be sent to any host a request names
(`Host: evil.example` -> `Location: http://evil.example/ai/rag`). The service itself redirects
nowhere else, so every redirect's Location is cut to its path and query: a relative reference,
which RFC 9110 allows and every client resolves against the address it asked.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import MutableHeaders
from starlette.types import Message

REDIRECTS = frozenset({301, 302, 303, 307, 308})


def without_host(start: Message) -> None:
    """A response's start (`http.response.start`): when it redirects, its Location cut to its
    path and query (service.api.request_context applies it to every response)."""
    if start["status"] in REDIRECTS:
        headers = MutableHeaders(scope=start)
        if (location := headers.get("location")) is not None:
            headers["location"] = relative(location)


def relative(location: str) -> str:
    """`location`'s path and query, without scheme or host ("/" when it has no path); a path
    that starts with "//" (or "/\\", to a browser) would name a host again: folded to one "/"."""
    parts = urlsplit(location)
    path = "/" + parts.path.lstrip("/\\")
    return urlunsplit(("", "", path, parts.query, ""))
