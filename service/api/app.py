"""The FastAPI application: routers, error handlers, and the runtime they share."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware

from service import __version__
from service.api import (
    admin,
    documents,
    health,
    metrics,
    openai,
    pages,
    rag,
    search,
    summarize,
)
from service.api.errors import install_error_handlers
from service.api.limits import BodySizeLimit
from service.api.runtime import Runtime
from service.metrics import REQUEST_SECONDS, REQUESTS
from service.observability import REQUEST_ID_HEADER, request_id_var

log = logging.getLogger(__name__)
access_log = logging.getLogger("service.access")

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
    origins = [o.strip() for o in runtime.settings().cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key", "X-Request-Id"],
            expose_headers=["X-Request-Id"],
        )
    app.include_router(rag.router)
    app.include_router(summarize.router)
    app.include_router(search.router)
    app.include_router(documents.router)
    app.include_router(openai.router)
    app.include_router(admin.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(pages.router)

    @app.middleware("http")
    async def request_id(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        incoming = request.headers.get("x-request-id", "")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.state.request_id = request_id
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        try:
            response = await call_next(request)
        finally:
            request_id_var.reset(token)
        response.headers[REQUEST_ID_HEADER] = request_id
        seconds = time.perf_counter() - started
        route = request.scope.get("route")
        endpoint = getattr(route, "path", "unmatched")
        REQUESTS.labels(endpoint, request.method, str(response.status_code)).inc()
        REQUEST_SECONDS.labels(endpoint).observe(seconds)
        access_log.info(
            "%s %s %d %.1fms",
            request.method,
            request.url.path,
            response.status_code,
            seconds * 1000,
            extra={
                "request_id": request_id,
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "ms": round(seconds * 1000, 1),
            },
        )
        return response

    return app
