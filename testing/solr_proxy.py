"""A recording, slowing HTTP proxy in front of the real Solr.

Every request is forwarded unchanged to Solr and its answer returned unchanged; the proxy only
notes when each search started and ended (and its `q`), and can hold searches for `delay`
seconds, so tests can see whether searches overlap in time, or answer them with an error
status of Solr's own shape (`fail_with`; a count alone: `count_status`, `count_delay`), as a
node in trouble does, or hold updates (`stall_updates`) as a Solr that stalls under load.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse


@dataclass
class Search:
    collection: str
    query: str
    started: float
    finished: float = 0.0
    request_id_header: str = ""
    request_id_param: str = ""
    traceparent: str = ""  # W3C trace context, when the service traces


@dataclass
class ProxyLog:
    delay: float = 0.0
    fail_with: int = 0  # an HTTP status every search gets instead of Solr's answer
    count_status: int = 0  # the same for a count (`q=*:*`, `rows=0`) alone
    count_delay: float = 0.0  # a count held this long
    stall_updates: int = 0  # the next this many updates are held `stall_seconds`, then sent
    stall_seconds: float = 0.0
    update_seconds: float = 0.0  # every update is held this long (a Solr busy embedding)
    updates: int = 0  # updates received
    searches: list[Search] = field(default_factory=list)


def create_solr_proxy(solr_url: str, log: ProxyLog) -> FastAPI:
    """Serve it and use `<proxy>/solr` as solr.url."""
    app = FastAPI()
    target = solr_url.rstrip("/")

    @app.get("/proxy-health")
    async def health() -> dict[str, str]:
        return {"status": "up"}

    @app.api_route("/solr/{path:path}", methods=["GET", "POST"])
    async def forward(path: str, request: Request) -> Response:
        body = await request.body()
        search = None
        if path.endswith("/select"):
            params = _search_params(body, request.headers.get("content-type", ""))
            search = Search(
                path.split("/")[0],
                str(params.get("q", "")),
                time.monotonic(),
                request_id_header=request.headers.get("x-request-id", ""),
                request_id_param=str(params.get("rid", "")),
                traceparent=request.headers.get("traceparent", ""),
            )
            log.searches.append(search)
            await asyncio.sleep(log.delay)
            counting = params.get("q") == "*:*" and str(params.get("rows")) == "0"
            if counting:
                await asyncio.sleep(log.count_delay)
            if counting and log.count_status:
                error = {"error": {"msg": "injected by the test proxy", "code": log.count_status}}
                return JSONResponse(error, status_code=log.count_status)
            if log.fail_with:
                error = {"error": {"msg": "injected by the test proxy", "code": log.fail_with}}
                return JSONResponse(error, status_code=log.fail_with)
        if path.endswith("/update"):
            log.updates += 1
            if log.stall_updates > 0:  # a Solr that stalls: the client gives up meanwhile
                log.stall_updates -= 1
                await asyncio.sleep(log.stall_seconds)
            await asyncio.sleep(log.update_seconds)
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("content-type", "authorization")
        }
        async with httpx.AsyncClient() as http:
            upstream = await http.request(
                request.method,
                f"{target}/{path}",
                params=request.query_params,
                content=body,
                headers=headers,
                timeout=60,
            )
        if search is not None:
            search.finished = time.monotonic()
        return Response(
            upstream.content,
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
        )

    return app


def _search_params(body: bytes, content_type: str) -> dict[str, object]:
    """A search's parameters as the service sends them: Solr's JSON request API (`params`),
    or a form."""
    if not body:
        return {}
    if content_type.startswith("application/json"):
        return dict(json.loads(body).get("params", {}))
    return {key: values[0] for key, values in parse_qs(body.decode("utf-8")).items()}
