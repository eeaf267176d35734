"""Datafari's own paths: its front-ends call `/Datafari/rest/v2.0/ai/rag` (and summarize, and
`search/...`), which are our routes under Datafari's Tomcat prefix."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

DATAFARI_PREFIX = "/Datafari/rest/v2.0"
# what Datafari's RagAPI serves under its prefix: the AI-powered API and the search API
_SERVED = ("/ai/", "/search/")


class DatafariPaths:
    """Serves `/Datafari/rest/v2.0/<route>` as `/<route>` for the RagAPI's routes: the same
    handler, the same envelope, the same logs and metrics (the path is rewritten in place,
    before routing)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            rest = scope["path"].removeprefix(DATAFARI_PREFIX)
            if rest != scope["path"] and rest.startswith(_SERVED):
                scope["path"] = rest
                raw = scope.get("raw_path")
                if raw is not None:
                    scope["raw_path"] = raw.removeprefix(DATAFARI_PREFIX.encode())
        await self.app(scope, receive, send)
