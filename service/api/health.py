"""Liveness (`/health/live`: the process serves) and readiness (`/health/ready`, also
`/health`: Solr's collections, the LLM and the configuration all work).

Anyone may ask; only a caller with the admin token is told where things are (the config path,
upstream addresses, circuit breaker states)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from service.api.auth import is_admin
from service.probes import addresses, probe_upstreams
from service.runtime import Runtime

router = APIRouter(tags=["operations"])


class Check(BaseModel):
    """One thing the service needs: `up` or `down`, and what was found (`reason` when down;
    with the admin token, where it is: `at`, `circuit`...)."""

    model_config = ConfigDict(extra="allow")

    status: Literal["up", "down"]


class Health(BaseModel):
    """Readiness: `up` when every check is."""

    status: Literal["up", "down"]
    checks: dict[str, Check] = Field(
        description="config, solr (one per collection), solr:nodes, llm, embeddings."
    )


class Liveness(BaseModel):
    status: Literal["up"]


@router.get("/health/live", response_model=Liveness)
async def live() -> dict[str, str]:
    """Answers as long as the process serves requests: restart it when this fails."""
    return {"status": "up"}


_READY = {
    200: {"model": Health, "description": "Requests can be answered."},
    503: {"model": Health, "description": "Something the service needs is down (see `checks`)."},
}


@router.get("/health", responses=_READY)
@router.get("/health/ready", responses=_READY)
async def ready(request: Request) -> JSONResponse:
    """200 when requests can be answered; 503 (with what is down) otherwise."""
    runtime: Runtime = request.app.state.runtime
    settings = runtime.settings()
    probe = await probe_upstreams(runtime, settings, embeddings=False)
    nodes = runtime.solr_nodes(settings)
    up, known = nodes.counts()
    checks: dict[str, dict[str, object]] = {"config": {"status": "up"}, **probe.checks}
    # one node down is no outage while another serves (requests go around it)
    checks["solr:nodes"] = {"status": "up" if up else "down", "up": up, "known": known}
    # readiness is what our upstreams answer now; a breaker opened by some requests' failures
    # (which a client may provoke) is shown, never taken as the service being down
    healthy = all(result["status"] == "up" for result in checks.values())
    if is_admin(request):  # where things are: for operators only
        checks["config"]["path"] = str(runtime.config.path)
        for name, address in addresses(settings).items():
            checks.setdefault(name, {})["at"] = address
        checks["llm"]["circuit"] = runtime.llm(settings).breaker.state
        checks["llm"]["tokenizer"] = settings.token_counter().name  # llm.tokenizer's count
        checks["embeddings"]["circuit"] = runtime.embeddings(settings).breaker.state
        # who turns passages and questions into vectors (solr.embeddings.mode; auto: as found)
        mode = runtime.embedding_mode(settings)
        solr_embeds = await mode.solr_embeds(runtime.solr(settings))
        checks["embeddings"]["by"] = "solr" if solr_embeds else "service"
        checks["solr:nodes"]["nodes"] = nodes.report()
    return JSONResponse(
        {"status": "up" if healthy else "down", "checks": checks},
        status_code=200 if healthy else 503,
    )
