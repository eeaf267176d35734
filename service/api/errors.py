"""The one place where failures become Datafari's error envelope.

{"status": "ERROR", "content": {"code": "428", "label": "ragNoFileFound",
                                "message": "<for the user>", "reason": "<technical>"}}
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api.protocols.envelopes import (
    ErrorEnvelope,
    ai_error_body,
    error_body,
    openai_body_of,
)
from service.api.protocols.ndjson import NDJSON_HEADERS, NDJSON_TYPE, EventStream
from service.errors import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    ServiceError,
    TechnicalError,
)

log = logging.getLogger(__name__)


_FEATURES = (
    ("/ai/summarize", "summarization"),
    ("/search/select", "rag"),  # Datafari's deprecated RAG through the search API
    ("/documents", "ingestion"),
    # KAITO's index API
    ("/index", "index"),
    ("/retrieve", "index"),
    ("/persist/", "index"),
    ("/load/", "index"),
    ("/search", "search"),
    ("/admin", "admin"),
)


def feature_for(path: str) -> str:
    return next((name for prefix, name in _FEATURES if path.startswith(prefix)), "rag")


# what any endpoint may answer: bad input, no key, too large a body, Solr or the LLM failing
_ANY_ENDPOINT = (400, 401, 413, 500, 502, 503, 504)


def documented_errors(
    *statuses: int, model: type[BaseModel] = ErrorEnvelope
) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route: its own error statuses and those of every endpoint."""
    return {
        status: {"model": model, "description": HTTPStatus(status).phrase}
        for status in sorted({*statuses, *_ANY_ENDPOINT})
    }


def stays_http_error(error: ServiceError) -> bool:
    """Whether Datafari 7's AI API answers this failure with its own HTTP status rather than
    a 200 whose status is ERROR: a refused body, no key, too large, too slow to send, over the
    caller's cap, or a full local model (it says when to retry)."""
    return error.status in (400, 401, 408, 413, 429) or error.retry_after is not None


def is_ai_api(path: str) -> bool:
    """Datafari 7's AI API: /ai, /ai/stream, /ai/agentic, /ai/conversations/..., and its
    compatibility routes (/ai/7/...: datafari.api.version=7)."""
    return path in ("/ai", "/ai/stream", "/ai/agentic") or path.startswith(
        ("/ai/conversations", "/ai/7/")
    )


def body_of(
    path: str, error: ServiceError, feature: str | None = None, language: str | None = None
) -> dict[str, object]:
    """The one mapping of a failure to what a client reads, whole or as a stream's last
    event: OpenAI's error shape under /v1/, Datafari 7's envelope under its AI API, Datafari's
    envelope elsewhere; `feature` (the label's prefix) defaults to the path's; the message a
    person reads is in the request's `language` (service.api.messages) when it has one."""
    if path.startswith("/v1/"):
        return openai_body_of(error)
    label = feature if feature is not None else feature_for(path)
    if is_ai_api(path):
        return ai_error_body(label, error, language)
    return error_body(label, error, language)


def error_response(
    request: Request, error: ServiceError, feature: str | None = None
) -> JSONResponse:
    """The error as a response of its status (body_of), with Retry-After when it has one;
    in the language a route set in `request.state.language` (its question's)."""
    language = getattr(request.state, "language", None)
    body = body_of(request.url.path, error, feature, language)
    response = JSONResponse(body, status_code=error.status)
    if error.retry_after is not None:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def log_failure(error: ServiceError) -> None:
    """A technical failure (Solr, the LLM, our code) is logged for the operator."""
    if isinstance(error, TechnicalError):
        log.warning("request failed: %s", error.reason)


def as_service_error(error: Exception, request_id: str) -> ServiceError:
    """Any exception as a ServiceError; an unexpected one is logged with its traceback."""
    if isinstance(error, ServiceError):
        return error
    log.error("unexpected error in request %s", request_id, exc_info=error)
    return TechnicalError(
        f"unexpected {type(error).__name__}; see the service log for request {request_id}"
    )


def describe_validation_errors(error: RequestValidationError | ValidationError) -> str:
    """What a body (FastAPI's) or a message (pydantic's, /ai/ws) fails, for the caller."""
    problems = []
    for item in error.errors():
        location = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        if item.get("type") == "json_invalid":
            problems.append("the body is not valid JSON")
        elif "Expected UploadFile" in str(item.get("msg", "")):  # a part without a filename
            problems.append(f"{location}: expected a file (a part with a filename), got a field")
        else:
            problems.append(f"{location or 'body'}: {item.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"


# what Starlette's routing answers, as our errors
_HTTP_ERRORS: dict[int, type[ServiceError]] = {
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
}


AI_STREAM = "/ai/stream"


def refused_stream(request: Request, error: ServiceError) -> Response:
    """Datafari 7's answer to a stream request it refuses: a 200 stream saying so
    (stream.started, error, stream.completed {status: ERROR})."""
    language = getattr(request.state, "language", None)
    lines = "".join(EventStream().refused(error, language))
    return Response(lines, media_type=NDJSON_TYPE, headers=NDJSON_HEADERS)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, error: ServiceError) -> Response:
        log_failure(error)
        if request.url.path == AI_STREAM and isinstance(error, BadRequest):
            return refused_stream(request, error)  # a body the JSON guard refused
        return error_response(request, error)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, error: RequestValidationError) -> Response:
        refused = BadRequest(describe_validation_errors(error))
        if request.url.path == AI_STREAM:
            return refused_stream(request, refused)
        return error_response(request, refused)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # every path, an unknown one too, answers in the documented shapes
        kind = _HTTP_ERRORS.get(error.status_code, BadRequest)
        response = error_response(request, kind(str(error.detail)))
        response.headers.update(error.headers or {})  # a 405's Allow
        return response

    # anything else is rendered by service.api.request_context, inside the request's context
