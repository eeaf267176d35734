"""POST /ai/rag: Datafari's RAG endpoint."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import (
    MAX_HISTORY_MESSAGES,
    MAX_MESSAGE_CHARS,
    MAX_QUERY_CHARS,
    DocumentId,
    OptionalLanguage,
)
from service.api.payload import json_route
from service.api.protocols.datafari6 import RagEvents, RagResponse
from service.api.protocols.driver import Ready, drive
from service.api.sse import SSE_HEADERS, event_stream
from service.llm import ChatMessage
from service.rag.assemble import ask
from service.rag.request import RagQuery
from service.retrieval import Scope
from service.text.language import answer_language

router = APIRouter(tags=["rag"], dependencies=[Depends(require_api_key)], route_class=json_route())

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


@router.post(
    "/ai/rag",
    response_model=RagResponse,
    responses={
        200: event_stream(
            "The answer; with `stream`, Server-Sent Events: `token` ({text}) as the LLM "
            "writes, then `grounding` (when on), `sources` ({documents}), then `done` ({status, "
            "message, timings, usage, cached, cache_age, abstained, confidence, grounding}); "
            "`error` (the error envelope) if it fails midway."
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
    events = RagEvents("rag", request.state.language)
    return StreamingResponse(
        drive(Ready(reply), events, request.state.request_id),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )
