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
from service.chains.prompts import not_found_sentence
from service.errors import (
    InvalidChatRequest,
    ModelNotServed,
    NoDocumentFound,
    ServiceError,
    UpstreamBadResponse,
)
from service.rag.assemble import ask
from service.rag.reply import Answer, Reply
from service.rag.request import RagQuery
from service.runtime import Runtime
from service.snapshot import Snapshot
from service.text.language import answer_language
from service.text.tokens import loaded_counter

log = logging.getLogger(__name__)
SSE = "text/event-stream"

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
            async with asyncio.timeout(MODEL_LIST_TIMEOUT_SECONDS):
                listed = await runtime.llm(settings).list_models()
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
    if chat.model:  # the encoding of the OpenAI model it names: loaded off the event loop
        await loaded_counter(settings.llm.tokenizer, chat.model)
    plan = plan_of(chat, settings, caller_of(request).scope)
    if plan.query is None:
        return await _relay(snapshot, chat.relayed())
    try:
        reply: Reply | Answer = await ask(snapshot, plan.query)
    except NoDocumentFound as nothing:
        # a caller's JSON form has no sentence to say it in: the 428 of openai.no.context=error
        if settings.openai.no_context != "refuse" or plan.query.options.form.json:
            raise
        reply = refusal(plan.query, nothing)
    completion = Completion(
        completion_id=f"chatcmpl-{uuid.uuid4().hex}",
        model=plan.model
        or (reply.model if isinstance(reply, Reply) else settings.llm.model)
        or "default",
        inline_sources=plan.inline_sources,
        include_usage=chat.wants_usage,
    )
    if chat.stream and isinstance(reply, Answer):  # the refusal: its sentence, one delta
        said = [*completion.started(), *completion.delta(reply.message)]
        said += [*completion.final(reply), *completion.ended()]
        return StreamingResponse(iter(["".join(said)]), media_type=SSE, headers=SSE_HEADERS)
    if chat.stream:
        return StreamingResponse(
            drive(Ready(reply), completion, request.state.request_id),
            media_type=SSE,
            headers=SSE_HEADERS,
        )
    whole = reply if isinstance(reply, Answer) else await reply.complete()
    return JSONResponse(completion.whole(whole))


def refusal(query: RagQuery, nothing: NoDocumentFound) -> Answer:
    """What a request for an answer from the documents gets when they hold nothing on it
    (openai.no.context=refuse): the not-found sentence in the question's language and why,
    never an answer from the LLM's memory."""
    lang = answer_language(query.lang, query.query)
    why = f"nothing in the documents to answer from: {nothing.reason}"
    return Answer(message=not_found_sentence(lang or None), documents=[], abstained=why)


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
