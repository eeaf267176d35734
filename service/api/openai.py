"""POST /v1/chat/completions and GET /v1/models: the OpenAI API over the search index.

Parse, hand the request to the pipeline, render: the rules that make a chat request a RAG
request (KAITO RAGEngine's, seeds 000/001) are service.conversation's. Requests without
retrieval are relayed to the LLM as they are, only with `openai.passthrough.enabled` (else a
400), so the service is no open LLM proxy. Answers are OpenAI chat completions (or chunks,
streamed) with a `sources` field.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from service.api.auth import require_api_key
from service.api.errors import (
    OpenAIErrorBody,
    as_service_error,
    documented_errors,
    openai_body_of,
)
from service.api.identity import caller_scope
from service.api.sse import SSE_HEADERS, sse_event
from service.config import Settings
from service.conversation import chat_query, needs_relay
from service.errors import (
    InvalidChatRequest,
    ModelNotServed,
    RelayDisabled,
    UpstreamBadResponse,
)
from service.pipeline import Answer, Reply
from service.runtime import Runtime

log = logging.getLogger(__name__)

router = APIRouter(tags=["openai"], dependencies=[Depends(require_api_key)])

PASSTHROUGH_OFF = (
    "This request does no retrieval (no index_name, or tools, functions, another role or "
    "non-text content), and relaying it to the LLM as it is is off here: name an index "
    "(index_name: FileShare, VectorMain, bm25, vector or hybrid) with text messages, or ask the "
    "administrator to set openai.passthrough.enabled=true."
)


@router.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    """The models answers come from (the configured one)."""
    return {"object": "list", "data": [_model_card(_served_model(request))]}


@router.get("/v1/models/{model_id:path}", responses=documented_errors(404, model=OpenAIErrorBody))
async def model(model_id: str, request: Request) -> dict[str, Any]:
    """One model of the list; 404 `model_not_found` for any other name."""
    served = _served_model(request)
    if model_id != served:
        raise ModelNotServed(f"model {model_id!r} is not served here; GET /v1/models lists them")
    return _model_card(served)


def _served_model(request: Request) -> str:
    runtime: Runtime = request.app.state.runtime
    return runtime.settings().llm_model or "default"


def _model_card(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "solr-rag"}


@router.post(
    "/v1/chat/completions",
    response_model=None,
    responses=documented_errors(model=OpenAIErrorBody),
)
async def chat_completions(request: Request) -> Response:
    """KAITO's rules (service.conversation): RAG when the body names an index, the LLM as it
    is otherwise (when openai.passthrough.enabled)."""
    runtime: Runtime = request.app.state.runtime
    body = await _json_body(request)
    settings = runtime.settings()
    if needs_relay(body):
        if not settings.openai_passthrough:
            raise RelayDisabled(PASSTHROUGH_OFF)
        return await _relay(runtime, settings, {k: v for k, v in body.items() if k != "index_name"})
    query = chat_query(body, settings, caller_scope(request, settings))
    pipeline = runtime.rag_pipeline(query.overrides)
    reply = await pipeline.run(query)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    model_name = pipeline.model or "default"
    if body.get("stream"):
        return StreamingResponse(
            _stream(reply, completion_id, model_name, request.state.request_id, _wants_usage(body)),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    answer = await reply.complete()
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.message},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(answer),
            "sources": _sources(answer),
        }
    )


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidChatRequest("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidChatRequest("The body must be a JSON object.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidChatRequest("messages must be a non-empty list.")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise InvalidChatRequest("every message needs a role.")
    return body


async def _relay(runtime: Runtime, settings: Settings, body: dict[str, Any]) -> Response:
    """The bypass: the configured LLM answers the request as it was sent."""
    upstream = await runtime.llm(settings).relay(body)
    media = upstream.headers.get("content-type", "application/json")
    if not body.get("stream") or upstream.status_code >= 400:
        content = upstream.content if upstream.is_closed else await upstream.aread()
        await upstream.aclose()
        return Response(content, status_code=upstream.status_code, media_type=media)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.HTTPError as error:
            broken = UpstreamBadResponse(f"the LLM broke off the stream ({type(error).__name__})")
            yield sse_event(openai_body_of(broken)).encode()
        finally:
            await upstream.aclose()

    return StreamingResponse(chunks(), media_type=media, headers=SSE_HEADERS)


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


async def _stream(
    reply: Reply, completion_id: str, model: str, request_id: str, include_usage: bool
) -> AsyncIterator[str]:
    """OpenAI's chunks: the role, the text as it comes, the end with the sources (and the
    usage); with `stream_options.include_usage`, a last chunk with `choices: []` and the
    usage, as OpenAI sends it."""

    def chunk(choices: list[dict[str, Any]], **extra: object) -> str:
        return sse_event(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": choices,
                **extra,
            }
        )

    def delta(content: dict[str, str], finish: str | None = None, **extra: object) -> str:
        return chunk([{"index": 0, "delta": content, "finish_reason": finish}], **extra)

    try:
        yield delta({"role": "assistant", "content": ""})
        async for text in reply:
            yield delta({"content": text})
        answer = reply.answer()
        yield delta({}, "stop", usage=_usage(answer), sources=_sources(answer))
        if include_usage:
            yield chunk([], usage=_usage(answer))
    except Exception as error:  # the stream has begun: the error becomes a chunk
        yield sse_event(openai_body_of(as_service_error(error, request_id)))
    yield "data: [DONE]\n\n"


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def _sources(answer: Answer) -> list[dict[str, Any]]:
    return [
        {"id": d.id, "title": d.title, "url": d.url, "content": d.content, "cited": d.cited}
        for d in answer.documents
    ]
