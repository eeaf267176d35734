"""The FastAPI application: routers, error handlers, and the runtime they share."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request, Response

from service import __version__
from service.api import documents, health, openai, rag, search, summarize
from service.api.errors import install_error_handlers
from service.api.limits import BodySizeLimit
from service.api.runtime import Runtime

log = logging.getLogger(__name__)

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def create_app(config_path: Path) -> FastAPI:
    """The service for one rag.properties; raises ConfigError or PromptTemplateError at once
    when either is invalid, so a misconfigured service never starts."""
    runtime = Runtime(config_path)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(
        title="solr-rag",
        version=__version__,
        description="Retrieval-augmented generation over Apache Solr, Datafari RagAPI compatible.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, limit=lambda: runtime.settings().request_max_bytes)
    app.include_router(rag.router)
    app.include_router(summarize.router)
    app.include_router(search.router)
    app.include_router(documents.router)
    app.include_router(openai.router)
    app.include_router(health.router)

    @app.middleware("http")
    async def request_id(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        incoming = request.headers.get("x-request-id", "")
        request.state.request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        response = await call_next(request)
        response.headers["X-Request-Id"] = request.state.request_id
        return response

    return app
