"""The router's trailing-slash redirect (`/ai/rag/` -> `/ai/rag`) names no host.

Starlette builds that redirect's Location from the request's own Host header, so a client, or a
cache in front of the service, could be sent to any host a request names
(`Host: evil.example` -> `Location: http://evil.example/ai/rag`). The service itself redirects
nowhere else, so every redirect's Location is cut to its path and query: a relative reference,
which RFC 9110 allows and every client resolves against the address it asked.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import MutableHeaders
from starlette.types import Message

REDIRECTS = frozenset({301, 302, 303, 307, 308})


def rewrite_location(start: Message, how: Callable[[str], str]) -> None:
    """A response's start (`http.response.start`): when it redirects, its Location made
    `how(location)`."""
    if start["status"] in REDIRECTS:
        headers = MutableHeaders(scope=start)
        if (location := headers.get("location")) is not None:
            headers["location"] = how(location)


def without_host(start: Message) -> None:
    """A redirect's Location cut to its path and query (service.api.request_context applies
    it to every response)."""
    rewrite_location(start, relative)


def under(prefix: str) -> Callable[[str], str]:
    """A Location's path put under `prefix`."""

    def prefixed(location: str) -> str:
        parts = urlsplit(location)
        return urlunsplit(parts._replace(path=prefix + parts.path))

    return prefixed


def relative(location: str) -> str:
    """`location`'s path and query, without scheme or host ("/" when it has no path); a path
    that starts with "//" (or "/\\", to a browser) would name a host again: folded to one "/"."""
    parts = urlsplit(location)
    path = "/" + parts.path.lstrip("/\\")
    return urlunsplit(("", "", path, parts.query, ""))
