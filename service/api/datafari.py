"""Datafari's own paths: its front-ends call `/Datafari/rest/v2.0/ai/rag` (and summarize, and
`search/...`), which are our routes under Datafari's Tomcat prefix. With
datafari.api.version=7, its `/ai/rag` and `/ai/summarize` are Datafari 7's compatibility
routes (/ai's body and envelope) instead of 6.2's RagAPI."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.redirects import rewrite_location, under
from service.config import Settings

DATAFARI_PREFIX = "/Datafari/rest/v2.0"
_UNDER_PREFIX = under(DATAFARI_PREFIX)
# what Datafari's RagAPI serves under its prefix: the AI-powered API and the search API
_SERVED = ("/ai/", "/search/", "/users/")
_SERVED_EXACTLY = ("/ai",)  # Datafari 7's AI API


# datafari.api.version=7: Datafari's /ai/rag and /ai/summarize are 7's compatibility routes
SEVEN_ROUTES = {"/ai/rag": "/ai/7/rag", "/ai/summarize": "/ai/7/summarize"}


class DatafariPaths:
    """Serves `/Datafari/rest/v2.0/<route>` as `/<route>` for the RagAPI's routes: the same
    handler, the same envelope, the same logs and metrics (the path is rewritten in place,
    before routing)."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings] | None = None) -> None:
        self.app = app
        self.settings = settings

    def _version(self) -> str:
        return self.settings().server.datafari_api_version if self.settings else "6.2"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):  # Datafari 7's /rest/v2.0/ai/ws too
            rest = scope["path"].removeprefix(DATAFARI_PREFIX)
            if rest != scope["path"] and (rest.startswith(_SERVED) or rest in _SERVED_EXACTLY):
                if rest in SEVEN_ROUTES and self._version() == "7":
                    rest = SEVEN_ROUTES[rest]  # Datafari 7's compatibility routes
                scope["path"] = rest
                raw = scope.get("raw_path")
                if raw is not None:
                    scope["raw_path"] = raw.removeprefix(DATAFARI_PREFIX.encode())
                if scope["type"] == "http":  # a redirect (`/ai/rag/`) stays under the prefix
                    await self.app(scope, receive, _redirected_under_prefix(send))
                    return
        await self.app(scope, receive, send)


def _redirected_under_prefix(send: Send) -> Send:
    """`send`, a redirect's Location put back under Datafari's prefix: behind a proxy that
    forwards only `/Datafari/*`, `/ai/rag` is no address."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            rewrite_location(message, _UNDER_PREFIX)
        await send(message)

    return sending


def add_datafari_paths(document: dict[str, Any]) -> None:
    """The OpenAPI document lists Datafari's paths too: each RagAPI route again under the
    prefix, the same operation (its own operationId, tagged `datafari`)."""
    paths = document.get("paths", {})
    for path, item in list(paths.items()):
        if not (path.startswith(_SERVED) or path in _SERVED_EXACTLY):
            continue
        alias = copy.deepcopy(item)
        for operation in alias.values():
            if isinstance(operation, dict) and "operationId" in operation:
                operation["operationId"] += "_datafari"
                operation["tags"] = ["datafari"]
                operation["summary"] = f"{operation.get('summary', path)} (Datafari's path)"
        paths[DATAFARI_PREFIX + path] = alias
