"""Liveness (`/health/live`: the process serves) and readiness (`/health/ready`, also
`/health`: Solr's collections, the LLM and the configuration all work).

Anyone may ask; only a caller with the admin token is told where things are (the config path,
upstream addresses, circuit breaker states)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.api.auth import is_admin
from service.api.runtime import Runtime
from service.errors import ServiceError

router = APIRouter(tags=["operations"])

CHECK_TIMEOUT_SECONDS = 5.0


async def check(coroutine: object) -> dict[str, str]:
    """`{"status": "up"}`, or `down` with the reason, within CHECK_TIMEOUT_SECONDS."""
    try:
        await asyncio.wait_for(coroutine, CHECK_TIMEOUT_SECONDS)  # type: ignore[arg-type]
    except ServiceError as error:
        return {"status": "down", "reason": error.reason}
    except TimeoutError:
        return {"status": "down", "reason": f"no answer within {CHECK_TIMEOUT_SECONDS:g}s"}
    return {"status": "up"}


@router.get("/health/live")
async def live() -> dict[str, str]:
    """Answers as long as the process serves requests: restart it when this fails."""
    return {"status": "up"}


_NOT_READY = {503: {"description": "Something the service needs is down (see `checks`)."}}


@router.get("/health", responses=_NOT_READY)
@router.get("/health/ready", responses=_NOT_READY)
async def ready(request: Request) -> JSONResponse:
    """200 when requests can be answered; 503 (with what is down) otherwise."""
    runtime: Runtime = request.app.state.runtime
    settings = runtime.settings()
    solr = runtime.solr(settings)
    llm = runtime.llm(settings)
    documents, passages, model = await asyncio.gather(
        check(solr.ping(settings.documents_collection)),
        check(solr.ping(settings.passages_collection)),
        check(llm.list_models()),
    )
    checks = {
        "config": {"status": "up"},
        f"solr:{settings.documents_collection}": documents,
        f"solr:{settings.passages_collection}": passages,
        "llm": model,
    }
    # readiness is what our upstreams answer now; a breaker opened by some requests' failures
    # (which a client may provoke) is shown, never taken as the service being down
    healthy = all(result["status"] == "up" for result in checks.values())
    if is_admin(request):  # where things are: for operators only
        checks["config"]["path"] = str(runtime.config.path)
        checks[f"solr:{settings.documents_collection}"]["at"] = settings.solr_url
        checks[f"solr:{settings.passages_collection}"]["at"] = settings.solr_url
        checks["llm"]["at"] = settings.api_endpoint
        checks["llm"]["circuit"] = llm.breaker.state
        checks["embeddings"] = {
            "at": settings.embeddings_endpoint,
            "circuit": runtime.embeddings(settings).breaker.state,
        }
    return JSONResponse(
        {"status": "up" if healthy else "down", "checks": checks},
        status_code=200 if healthy else 503,
    )
