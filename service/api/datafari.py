"""Datafari's own paths: its front-ends call `/Datafari/rest/v2.0/ai/rag` (and summarize, and
`search/...`), which are our routes under Datafari's Tomcat prefix."""

from __future__ import annotations

import copy
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

DATAFARI_PREFIX = "/Datafari/rest/v2.0"
# what Datafari's RagAPI serves under its prefix: the AI-powered API and the search API
_SERVED = ("/ai/", "/search/", "/users/")
_SERVED_EXACTLY = ("/ai",)  # Datafari 7's AI API


class DatafariPaths:
    """Serves `/Datafari/rest/v2.0/<route>` as `/<route>` for the RagAPI's routes: the same
    handler, the same envelope, the same logs and metrics (the path is rewritten in place,
    before routing)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):  # Datafari 7's /rest/v2.0/ai/ws too
            rest = scope["path"].removeprefix(DATAFARI_PREFIX)
            if rest != scope["path"] and (rest.startswith(_SERVED) or rest in _SERVED_EXACTLY):
                scope["path"] = rest
                raw = scope.get("raw_path")
                if raw is not None:
                    scope["raw_path"] = raw.removeprefix(DATAFARI_PREFIX.encode())
        await self.app(scope, receive, send)


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
