"""POST /v1/chat/completions and GET /v1/models: the OpenAI API over the search index.

Parse, hand the request to the pipeline, render: the rules that make a chat request a RAG
request (KAITO RAGEngine's, seeds 000/001, grounded by default) are service.api.conversation's.
Requests for the LLM as it is are relayed only with `openai.passthrough.enabled` (else a
400), so the service is no open LLM proxy. Answers are OpenAI chat completions (or chunks,
streamed) with the sources as `sources`, `citations` and, for the rag* models, a Sources list
inside the message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from service.api.auth import require_api_key
from service.api.conversation import RAG_MODELS, plan_of
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.openai_schema import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Model,
    ModelList,
    request_body,
)
from service.api.payload import json_route
from service.api.protocols.driver import Ready, drive
from service.api.protocols.envelopes import OpenAIErrorBody, openai_body_of
from service.api.protocols.openai import Completion
from service.api.sse import SSE_HEADERS, event_stream, sse_event
from service.errors import (
    InvalidChatRequest,
    ModelNotServed,
    ServiceError,
    UpstreamBadResponse,
)
from service.rag.assemble import ask
from service.runtime import Runtime
from service.snapshot import Snapshot

log = logging.getLogger(__name__)

router = APIRouter(
    tags=["openai"], dependencies=[Depends(require_api_key)], route_class=json_route()
)

MODEL_LIST_TIMEOUT_SECONDS = 5.0


@router.get("/v1/models", response_model=ModelList)
async def models(request: Request) -> ModelList:
    """The models a request may name: the rag* models (answers from the index, with the
    configured retrieval or a given one), then the LLM's own (answers from the index unless
    openai.passthrough.enabled relays them)."""
    return ModelList(data=[_card(name) for name in await _served(request.app.state.runtime)])


@router.get(
    "/v1/models/{model_id:path}",
    response_model=Model,
    responses=documented_errors(404, model=OpenAIErrorBody),
)
async def model(model_id: str, request: Request) -> Model:
    """One model of the list; 404 `model_not_found` for any other name."""
    if model_id not in await _served(request.app.state.runtime):
        raise ModelNotServed(
            f"model {model_id[:256]!r} is not served here; GET /v1/models lists them"
        )
    return _card(model_id)


async def _served(runtime: Runtime) -> list[str]:
    """rag*, the configured model, and with the relay on the LLM's list (when it answers)."""
    settings = runtime.settings()
    names = [*RAG_MODELS, settings.llm.model or "default"]
    if settings.openai.passthrough:
        try:
            listed = await asyncio.wait_for(
                runtime.llm(settings).list_models(), MODEL_LIST_TIMEOUT_SECONDS
            )
        except (ServiceError, TimeoutError) as error:
            log.info("the LLM's models are not listed: %s", error)
            listed = []
        names += [name for name in listed if name not in names]
    return names


def _card(model_id: str) -> Model:
    owner = "solr-rag" if model_id in RAG_MODELS else "llm"
    return Model(id=model_id, created=0, owned_by=owner)


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    openapi_extra={"requestBody": request_body(ChatCompletionRequest)},
    responses={
        200: event_stream(
            "A chat.completion; with `stream`, its chunks as Server-Sent Events "
            "(`data: {chat.completion.chunk}` ... `data: [DONE]`).",
            ChatCompletionChunk.__name__,
        ),
        **documented_errors(404, 428, model=OpenAIErrorBody),
    },
)
async def chat_completions(request: Request, snapshot: CurrentSnapshot) -> Response:
    """An OpenAI chat completion answered from the index (service.api.conversation's rules), or
    relayed to the LLM as it is (openai.passthrough.enabled)."""
    chat = ChatCompletionRequest.parse(await _json_body(request))
    settings = snapshot.settings
    plan = plan_of(chat, settings, caller_of(request).scope)
    if plan.query is None:
        return await _relay(snapshot, chat.relayed())
    reply = await ask(snapshot, plan.query)
    completion = Completion(
        completion_id=f"chatcmpl-{uuid.uuid4().hex}",
        model=plan.model or reply.model or "default",
        inline_sources=plan.inline_sources,
        include_usage=chat.wants_usage,
    )
    if chat.stream:
        return StreamingResponse(
            drive(Ready(reply), completion, request.state.request_id),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    return JSONResponse(completion.whole(await reply.complete()))


async def _json_body(request: Request) -> object:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidChatRequest("The body is not valid JSON.") from None


async def _relay(snapshot: Snapshot, body: dict[str, Any]) -> Response:
    """The bypass: the configured LLM answers the request as it was sent."""
    upstream = await snapshot.llm.relay(body)
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
            # a line of its own (the upstream may have stopped mid-line), then the end
            yield ("\n\n" + sse_event(openai_body_of(broken)) + "data: [DONE]\n\n").encode()
        finally:
            await upstream.aclose()

    return StreamingResponse(chunks(), media_type=media, headers=SSE_HEADERS)
