"""POST /v1/chat/completions and GET /v1/models: the OpenAI API over the search index.

KAITO RAGEngine's semantics (seeds 000/001), plus streaming with RAG and a `sources` field:

- RAG applies when the body names an index in `index_name`: `FileShare` (BM25 over whole
  documents), `VectorMain` (passages, by the configured vector or hybrid search), or a method
  directly: `bm25`, `vector`, `hybrid`.
- The request goes to the configured LLM unchanged (and its answer comes back unchanged) when
  no index is named, when `tools` or `functions` are present, when a message has a role other
  than system/developer/user/assistant, or when user content is not text; only when
  `openai.passthrough.enabled` is true (else a 400), so the service is no open LLM proxy.
- The user messages after the last assistant message, joined by a blank line, are the
  question; every other message is history, sent with every LLM request.
- Prompt size: tokens are counted as 4 characters each (a documented estimate: no tokenizer
  download); over `llm.context.window` -> 400; `max_tokens` above what is left is lowered,
  and with RAG to half the window at most, so that the sources fit in the other half.
"""

from __future__ import annotations

import json
import logging
import math
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
    openai_error_body,
)
from service.api.identity import caller_scope
from service.api.runtime import Runtime
from service.api.sse import SSE_HEADERS, sse_event
from service.config import Settings
from service.config.settings import CHARS_PER_TOKEN
from service.errors import ServiceError
from service.llm import ChatMessage
from service.pipeline import Answer, RagQuery, Staged
from service.retrieval import Scope

log = logging.getLogger(__name__)

router = APIRouter(tags=["openai"], dependencies=[Depends(require_api_key)])

MAX_MODEL_NAME = 256
CHAT_ROLES = frozenset({"system", "developer", "user", "assistant"})
METHODS = frozenset({"bm25", "vector", "hybrid"})
NO_USER_PROMPT = "There must be a user prompt since the latest assistant message."
TOO_LONG = "Prompt length exceeds context window."
PASSTHROUGH_OFF = (
    "This request does no retrieval (no index_name, or tools, functions, another role or "
    "non-text content), and relaying it to the LLM as it is is off here: name an index "
    "(index_name: FileShare, VectorMain, bm25, vector or hybrid) with text messages, or ask the "
    "administrator to set openai.passthrough.enabled=true."
)


class OpenAIError(Exception):
    """An error in OpenAI's shape: {"error": {"message", "type", "code"}}."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code

    @classmethod
    def of(cls, error: ServiceError) -> OpenAIError:
        body = openai_body_of(error)["error"]
        return cls(error.status, body["message"], body["code"])  # type: ignore[index]

    def body(self) -> dict[str, object]:
        return openai_error_body(self.status, self.message, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    characters = sum(len(_text(message.get("content"))) for message in messages)
    return math.ceil(characters / CHARS_PER_TOKEN)


@router.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    settings = request.app.state.runtime.settings()
    return {
        "object": "list",
        "data": [
            {
                "id": settings.llm_model or "default",
                "object": "model",
                "created": 0,
                "owned_by": "solr-rag",
            }
        ],
    }


@router.post(
    "/v1/chat/completions",
    response_model=None,
    responses=documented_errors(model=OpenAIErrorBody),
)
async def chat_completions(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    try:
        body = await _json_body(request)
        settings = runtime.settings()
        index = body.get("index_name")
        if index is None or _must_bypass(body):
            if not settings.openai_passthrough:
                raise OpenAIError(400, PASSTHROUGH_OFF, "passthrough_disabled")
            return await _relay(
                runtime, settings, {k: v for k, v in body.items() if k != "index_name"}
            )
        scope = caller_scope(request, settings)
        return await _rag(runtime, settings, body, str(index), request.state.request_id, scope)
    except OpenAIError as error:
        return error.response()
    except ServiceError as error:
        return OpenAIError.of(error).response()


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OpenAIError(400, "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "The body must be a JSON object.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(400, "messages must be a non-empty list.")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise OpenAIError(400, "every message needs a role.")
    return body


def _must_bypass(body: dict[str, Any]) -> bool:
    if body.get("tools") or body.get("functions"):
        return True
    for message in body["messages"]:
        if message["role"] not in CHAT_ROLES:
            return True
        if message["role"] == "user" and not _is_text(message.get("content")):
            return True
    return False


def _is_text(content: object) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" for part in content
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def split_conversation(messages: list[dict[str, Any]]) -> tuple[str, list[ChatMessage]]:
    """(question, history): the user messages after the last assistant message, joined by a
    blank line; everything else in order."""
    last_assistant = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1
    )
    tail = range(last_assistant + 1, len(messages))
    question_at = [i for i in tail if messages[i]["role"] == "user"]
    if not question_at:
        raise OpenAIError(400, NO_USER_PROMPT)
    question = "\n\n".join(_text(messages[i].get("content")) for i in question_at)
    history = [
        ChatMessage("system" if m["role"] == "developer" else m["role"], _text(m.get("content")))
        for i, m in enumerate(messages)
        if i not in question_at
    ]
    return question, history


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
            message = f"the LLM broke off the stream ({type(error).__name__})"
            yield sse_event(OpenAIError(502, message).body()).encode()
        finally:
            await upstream.aclose()

    return StreamingResponse(chunks(), media_type=media, headers=SSE_HEADERS)


def _model_of(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is None or model == "":
        return None
    if not isinstance(model, str) or len(model) > MAX_MODEL_NAME:
        raise OpenAIError(400, f"model must be a model name of at most {MAX_MODEL_NAME} characters")
    return model


def _temperature_of(body: dict[str, Any]) -> float | None:
    temperature = body.get("temperature")
    if temperature is None:
        return None
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise OpenAIError(400, "temperature must be a number from 0 to 2")
    if not 0 <= temperature <= 2:
        raise OpenAIError(400, "temperature must be a number from 0 to 2")
    return float(temperature)


def _retrieval_settings(settings: Settings, index: str) -> Settings:
    key = index.lower()
    if key == "fileshare":
        method = "bm25"
    elif key == "vectormain":
        method = settings.retrieval if settings.retrieval != "bm25" else "hybrid"
    elif key in METHODS:
        method = key
    else:
        raise OpenAIError(
            400,
            f"Unknown index_name {index!r}: use FileShare, VectorMain, bm25, vector or hybrid.",
        )
    return settings.model_copy(update={"retrieval_method": method, "vector_search_enabled": False})


async def _rag(
    runtime: Runtime,
    settings: Settings,
    body: dict[str, Any],
    index: str,
    request_id: str,
    scope: Scope,
) -> Response:
    messages = body["messages"]
    question, history = split_conversation(messages)
    window = settings.llm_context_window
    prompt_tokens = estimate_tokens(messages)
    if prompt_tokens > window:
        raise OpenAIError(400, TOO_LONG, "context_length_exceeded")
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    max_tokens = int(asked) if isinstance(asked, int) and asked > 0 else settings.llm_max_tokens
    # what is left after the prompt, and at most half the window: the sources get the rest
    allowed = min(window - prompt_tokens, window // 2)
    if max_tokens > allowed:
        log.info(
            "max_tokens lowered from %d to %d (context window %d)", max_tokens, allowed, window
        )
        max_tokens = allowed
    budget_tokens = min(settings.max_request_tokens or window, window - max_tokens)
    rag_settings = _retrieval_settings(settings, index).model_copy(
        update={"max_request_tokens": budget_tokens}
    )
    llm = runtime.llm(
        rag_settings,
        model=_model_of(body),
        max_tokens=max_tokens,
        temperature=_temperature_of(body),
    )
    query = RagQuery(query=question, history=tuple(history), always_use_history=True, scope=scope)
    staged = await runtime.rag_pipeline(rag_settings, llm).prepare(query)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    model_name = llm.options.model or "default"
    if body.get("stream"):
        return StreamingResponse(
            _stream(staged, completion_id, model_name, request_id),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
    answer = await staged.complete()
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


async def _stream(
    staged: Staged, completion_id: str, model: str, request_id: str
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, str], finish: str | None = None, **extra: object) -> str:
        return sse_event(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
        )

    try:
        yield chunk({"role": "assistant", "content": ""})
        async for text in staged.stream():
            yield chunk({"content": text})
        answer = staged.answer()
        yield chunk({}, "stop", usage=_usage(answer), sources=_sources(answer))
    except Exception as error:  # the stream has begun: the error becomes a chunk
        yield sse_event(OpenAIError.of(as_service_error(error, request_id)).body())
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
