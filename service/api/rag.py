"""POST /ai/rag: Datafari's RAG endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import as_service_error, body_of, documented_errors
from service.api.fields import DocumentId, OptionalLanguage
from service.api.grounding import GroundingOut
from service.api.payload import json_route
from service.api.sources import SourceOut, sources_of
from service.api.sse import SSE_HEADERS, event_stream, sse_event
from service.llm import ChatMessage
from service.rag.assemble import ask
from service.rag.reply import Answer, Reply
from service.rag.request import RagQuery
from service.retrieval import Scope
from service.text.language import answer_language

router = APIRouter(tags=["rag"], dependencies=[Depends(require_api_key)], route_class=json_route())

MAX_QUERY_CHARS = 20_000
MAX_HISTORY_MESSAGES = 100
MAX_MESSAGE_CHARS = 20_000
FORMATS = ("bulletpoint", "stepbystep", "text", "default")


class HistoryMessage(BaseModel):
    """One earlier message of the conversation (Datafari's Message: user, assistant or
    system)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class RagRequest(BaseModel):
    """The body of POST /ai/rag; fields Datafari clients send that we do not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question.")
    id: DocumentId | None = Field(None, description="Answer from this FileShare document only.")
    lang: OptionalLanguage = Field(
        None, description="ISO code of the answer's language (empty: the default)."
    )
    history: list[HistoryMessage] | None = Field(
        None,
        max_length=MAX_HISTORY_MESSAGES,
        description="Earlier messages; used when chat.memory.enabled is true.",
    )
    format: Literal["bulletpoint", "stepbystep", "text", "default"] | None = Field(
        None, description="The answer's form; a name Datafari does not know: the default."
    )
    stream: bool = Field(
        False,
        description="Answer with Server-Sent Events: `token` events ({text}) as the LLM writes, "
        "then `grounding` (grounding.enabled), `sources` ({documents}), then `done` ({status, "
        "message, timings, usage}: the message as checked, without dropped sentences); an "
        "`error` event (the error envelope) if it fails midway, or grounding refuses it.",
    )

    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, value: object) -> object:
        """Datafari answers an unknown format in its default form; so do we."""
        return "default" if isinstance(value, str) and value not in FORMATS else value

    def to_query(self, scope: Scope) -> RagQuery:
        return RagQuery(
            query=self.query,
            document_id=self.id,
            lang=self.lang,
            history=tuple(ChatMessage(m.role, m.content) for m in self.history or ()),
            format=self.format or "default",
            scope=scope,
        )


class RagContent(BaseModel):
    """The answer and its sources."""

    message: str
    documents: list[SourceOut]


class UsageOut(BaseModel):
    """What the answer cost in LLM calls and tokens."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def of(cls, answer: Answer) -> UsageOut:
        usage = answer.usage
        return cls(
            llm_calls=answer.llm_calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )


class ConfidenceOut(BaseModel):
    """The LLM's own confidence in its answer (grounding.abstain.not.found decides on it)."""

    signal: str = Field(description="The signal abstention is decided on, or why there is none.")
    not_found: float | None = Field(
        None, description="Probability the first step gave the not-found sentence's first token."
    )
    mean_logprob: float | None = Field(None, description="Mean log-probability of its tokens.")
    min_logprob: float | None = Field(None, description="Lowest log-probability of its tokens.")
    supported: float | None = Field(
        None,
        description="grounding.verify: the probability of yes when the LLM was asked, before "
        "answering, whether a document says the answer.",
    )


class RagResponse(BaseModel):
    """The answer of POST /ai/rag, in Datafari's envelope."""

    status: Literal["OK"] = "OK"
    content: RagContent
    timings: dict[str, float] = Field(
        description="Milliseconds per stage that ran, by its name: cache, rewrite, expand, "
        "retrieve (Solr and embeddings), chunk, rerank, grade, verify, chain (prompting, LLM calls "
        "included), grounding; llm (wall time with an LLM call in flight), total."
    )
    usage: UsageOut
    grounding: GroundingOut | None = Field(
        None,
        description="Each sentence checked against its sources; null unless grounding.enabled.",
    )
    cached: bool = Field(
        False, description="Whether the answer is one given before (the answer cache)."
    )
    cache_age: float | None = Field(
        None, description="Seconds since a cached answer was made; null when not cached."
    )
    abstained: str | None = Field(
        None,
        description="Why the answer says the documents do not hold it (the LLM said so of the "
        "sources it read); null when it answers. When the search or the reranker finds nothing "
        "to answer from, the reply is a 428 (ragNoFileFound) whose content.reason says why.",
    )
    confidence: ConfidenceOut | None = Field(
        None,
        description="What the LLM's token probabilities say of its answer; null when no "
        "answer was written from sources.",
    )

    @classmethod
    def of(cls, answer: Answer) -> RagResponse:
        return cls(
            content=RagContent(
                message=answer.message,
                documents=sources_of(answer),
            ),
            timings=answer.timings,
            usage=UsageOut.of(answer),
            grounding=answer.grounding.to_json() if answer.grounding else None,
            cached=answer.cache_age is not None,
            cache_age=answer.cache_age,
            abstained=answer.abstained,
            confidence=answer.confidence,
        )


@router.post(
    "/ai/rag",
    response_model=RagResponse,
    responses={
        200: event_stream(
            "The answer; with `stream`, Server-Sent Events: `token` ({text}) as the LLM "
            "writes, then `grounding` (when on), `sources` ({documents}), then `done` ({status, "
            "message, timings, usage, cached, cache_age, abstained}); `error` (the error "
            "envelope) if it fails midway."
        ),
        **documented_errors(403, 404, 428),
    },
)
async def rag(
    body: RagRequest, request: Request, snapshot: CurrentSnapshot
) -> RagResponse | StreamingResponse:
    """Answer `query` from the documents Solr finds, with those documents as sources."""
    request.state.language = answer_language(body.lang, body.query)  # for its errors
    query = body.to_query(caller_of(request).scope)
    # everything but the final LLM request happens now, so its errors are plain JSON errors
    reply = await ask(snapshot, query)
    if not body.stream:
        return RagResponse.of(await reply.complete())
    return StreamingResponse(
        _events(reply, request.state.request_id, request.state.language),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


async def _events(reply: Reply, request_id: str, language: str) -> AsyncIterator[str]:
    try:
        async for text in reply:
            yield sse_event({"text": text}, "token")
        response = RagResponse.of(await reply.answer())
        if response.grounding is not None:
            yield sse_event(response.grounding.model_dump(), "grounding")
        documents = [document.model_dump() for document in response.content.documents]
        yield sse_event({"documents": documents}, "sources")
        yield sse_event(
            {
                "status": "OK",
                "message": response.content.message,
                "timings": response.timings,
                "usage": response.usage.model_dump(),
                "cached": response.cached,
                "cache_age": response.cache_age,
                "abstained": response.abstained,
                "confidence": response.confidence and response.confidence.model_dump(),
            },
            "done",
        )
    except Exception as error:  # the stream has begun: the error becomes an event
        failure = as_service_error(error, request_id)
        yield sse_event(body_of("/ai/rag", failure, language=language), "error")
