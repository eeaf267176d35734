"""GET /metrics: the service's Prometheus metrics (see service.metrics)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from service.metrics import SOLR_NODES, exposed
from service.runtime import Runtime

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    up, known = runtime.solr_nodes(runtime.settings()).counts()
    SOLR_NODES.labels("up").set(up)
    SOLR_NODES.labels("down").set(known - up)
    return Response(exposed(), media_type=CONTENT_TYPE_LATEST)
