"""The FastAPI application: routers, error handlers, and the runtime they share."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from service import __version__, tracing
from service.api import (
    admin,
    ai,
    ai_ws,
    datafari_search,
    documents,
    health,
    kaito,
    metrics,
    openai,
    pages,
    rag,
    search,
    summarize,
    users,
)
from service.api import jobs as jobs_api
from service.api.connections import quiet_accept_errors
from service.api.datafari import DatafariPaths, add_datafari_paths
from service.api.docs import install_docs
from service.api.door import Door, DoorMiddleware
from service.api.errors import install_error_handlers
from service.api.jobs import JobRequest, body_limit
from service.api.limits import BodySizeLimit
from service.api.llm_work import CancelOnDisconnect
from service.api.mcp import PATH as MCP_PATH
from service.api.mcp import McpEndpoint, create_mcp, http_scope
from service.api.openai_schema import add_schemas
from service.api.request_context import RequestContext
from service.job_runner import JobRunner
from service.observability import configure_logging
from service.runtime import Runtime

log = logging.getLogger(__name__)


CONFIG_VARIABLE = "SOLR_RAG_CONFIG"


def app_from_environment() -> FastAPI:
    """The app of one worker process (`solr-rag serve --workers N` spawns them): its
    rag.properties is $SOLR_RAG_CONFIG. Each worker reloads the file when it changes, so an
    edit reaches them all."""
    configure_logging()
    return create_app(Path(os.environ[CONFIG_VARIABLE]))


# FastAPI's own OpenTelemetry (0.165 and later; a global provider, FASTAPI_OTEL_AUTO_CONFIGURE)
# would send each request's url.query (a search's words) and exceptions' messages: the
# service's spans (service.tracing) are the only ones
_NO_FASTAPI_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "auto_configure": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(config_path: Path) -> FastAPI:
    """The service for one rag.properties; raises ConfigError or PromptTemplateError at once
    when either is invalid, so a misconfigured service never starts."""
    runtime = Runtime(config_path)
    # a bad tracing setting (observability.tracing.*, OTEL_*) refused here, in one line, not
    # by uvicorn's start with a traceback; the tracer itself starts with the service (lifespan)
    tracing.TracingConfig.of(runtime.settings().observability, os.environ)
    agents = McpEndpoint(runtime, create_mcp(runtime, http_scope))

    jobs = JobRunner(runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        quiet_accept_errors(asyncio.get_running_loop())  # out of descriptors: said once
        # OpenTelemetry traces (observability.tracing.*, OTEL_*): read at startup
        with tracing.installed(runtime.settings().observability, version=__version__):
            await runtime.start()
            running = asyncio.create_task(jobs.run_forever(), name="ingestion jobs")
            try:
                async with agents.running():
                    yield
            finally:
                running.cancel()
                await asyncio.wait([running])
                await runtime.stop()

    app = FastAPI(
        title="solr-rag",
        version=__version__,
        description="Retrieval-augmented generation over Apache Solr, Datafari RagAPI compatible.",
        lifespan=lifespan,
        docs_url=None,  # served offline by service.api.docs
        redoc_url=None,
        **_NO_FASTAPI_TELEMETRY,
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    # JSON bodies are read by their routes (service.api.payload), within this bound
    app.add_middleware(
        BodySizeLimit,
        limit=lambda path: body_limit(runtime.settings(), path),
        pause=lambda: runtime.settings().server.body_timeout,
        whole=lambda: runtime.settings().server.request_timeout,
    )
    # an LLM question whose caller leaves is cancelled (service.api.llm_work)
    app.add_middleware(CancelOnDisconnect)
    # the one door (service.api.door): who calls, from which page, within which cap and the
    # LLM's admission; Datafari 7's WebSocket asks it again at every turn
    app.state.door = Door(runtime.settings, runtime.llm_loads)
    app.add_middleware(DoorMiddleware, door=app.state.door)
    origins = [o.strip() for o in runtime.settings().server.cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key", "X-Request-Id"],
            expose_headers=["X-Request-Id"],
        )
    app.include_router(rag.router)
    app.include_router(ai.router)
    app.include_router(ai_ws.router)
    app.include_router(users.router)
    app.include_router(summarize.router)
    app.include_router(search.router)
    app.include_router(datafari_search.router)
    app.include_router(documents.router)
    app.include_router(jobs_api.router)
    app.include_router(kaito.router)
    app.include_router(openai.router)
    app.include_router(admin.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(pages.router)
    # the Model Context Protocol, for agents (service.api.mcp)
    app.add_route(MCP_PATH, agents, ["GET", "POST", "DELETE"], include_in_schema=False)
    install_docs(app)
    app.add_middleware(
        DatafariPaths, settings=runtime.settings
    )  # before routing, and before the checks that name a route
    app.add_middleware(RequestContext)  # outermost: every response gets its id and log line
    _document_by_hand(app)

    return app


def _document_by_hand(app: FastAPI) -> None:
    """/openapi.json with the schemas routes refer to by hand (the chat and job bodies)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            add_schemas(document, JobRequest)
            add_datafari_paths(document)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
