"""Each request's id, access log line and metrics (and a redirect's Location without a host,
service.api.redirects): an ASGI middleware around the whole app.

Plain ASGI rather than Starlette's BaseHTTPMiddleware, which runs the app in a second task and
copies every response through a stream: under load that cost showed. The id is the client's
`X-Request-Id` when it is a safe token, else a new one; it is returned in the response, set in
`request.state.request_id` and in the logging/upstream context (service.observability).

An unexpected exception becomes the documented 500 here, inside the request's context, so
that response carries the id too and its log line (with the traceback) names the right request.
Metric labels take only known methods and route templates, so no client can mint new series;
log lines escape control characters, so no path can forge a line.

With tracing on (service.tracing), each request is a server span (`POST /ai/rag`), continuing
an incoming `traceparent`, and its id is the trace's (32 hex digits): a user's report leads to
the trace. The span names the route template and the status, never the path's or the query
string's text (a search's words may be in them).
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import tracing
from service.api.errors import as_service_error, error_response
from service.api.redirects import without_host
from service.metrics import REQUEST_SECONDS, REQUESTS
from service.observability import REQUEST_ID_HEADER, printable, request_id_var

access_log = logging.getLogger("service.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# nginx's "client closed request": the client left before its answer; no server failure
CLIENT_LEFT = 499
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# what is asked every few seconds by machines (probes, Prometheus): no trace of each
UNTRACED = ("/health", "/metrics")


class RequestContext:
    """ASGI middleware: the request's id, access log line, metrics and unexpected 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if tracing.enabled() and not scope["path"].startswith(UNTRACED):
            headers = Headers(scope=scope)
            method = scope["method"] if scope["method"] in KNOWN_METHODS else "_OTHER"
            attributes = {"http.request.method": method, "url.scheme": scope.get("scheme", "")}
            with tracing.server(method, headers, attributes) as span:
                await self._serve(scope, receive, send, span)
        else:
            await self._serve(scope, receive, send, tracing.NO_SPAN)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, span: tracing.Span) -> None:
        incoming = Headers(scope=scope).get("x-request-id", "")
        request_id = incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request_id = span.trace_id or request_id  # traced: the trace's id
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        started = time.perf_counter()
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, request_id)
                without_host(message)  # a redirect's Location never the caller's Host
            await send(message)

        token = request_id_var.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
            if not response_started and scope["state"].get("client_left"):
                status = CLIENT_LEFT  # cancelled by CancelOnDisconnect: nobody to answer
        except ClientDisconnect:  # the client left while sending its body: not our failure
            status = CLIENT_LEFT
        except Exception as error:
            if response_started:  # too late for an error response: the connection is cut
                access_log.error("response to request %s broken off", request_id, exc_info=error)
                raise
            response = error_response(Request(scope), as_service_error(error, request_id))
            await response(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)
            _record(scope, request_id, status, time.perf_counter() - started)
            if span is not tracing.NO_SPAN:
                _describe(span, scope, status)


def _describe(span: tracing.Span, scope: Scope, status: int) -> None:
    """The server span's route (`POST /ai/rag`: its template, never the path a client sent)
    and status; a 5xx marks it failed."""
    route = getattr(scope.get("route"), "path", None)
    if route:
        method = scope["method"] if scope["method"] in KNOWN_METHODS else "HTTP"
        span.rename(f"{method} {route}")
        span.set("http.route", route)
    span.set("http.response.status_code", status)
    if status >= 500:
        span.failed(str(status))


def _record(scope: Scope, request_id: str, status: int, seconds: float) -> None:
    endpoint = getattr(scope.get("route"), "path", "unmatched")
    method = scope["method"] if scope["method"] in KNOWN_METHODS else "other"
    record_access(endpoint, method, scope["path"], status, seconds, request_id)


def record_access(
    endpoint: str, method: str, path: str, status: int, seconds: float, request_id: str
) -> None:
    """One access log line and the metrics of a request, or of a WebSocket turn (method WS):
    `endpoint` a route template and `method` a known one, so no client mints a series."""
    shown = printable(path)
    REQUESTS.labels(endpoint, method, str(status)).inc()
    REQUEST_SECONDS.labels(endpoint).observe(seconds)
    access_log.info(
        "%s %s %d %.1fms",
        method,
        shown,
        status,
        seconds * 1000,
        extra={
            "request_id": request_id,
            "method": method,
            "path": shown,
            "status": status,
            "ms": round(seconds * 1000, 1),
        },
    )
