"""POST /ai and /ai/stream: Datafari 7's AI API, the one its chat bot calls, as its code
speaks it (francelabs/datafari: AiPowered, ChatStream, NdjsonChatStream, StreamToolExecutor).

One body for every action (`{query, action, id, agent, lang, history, filters, memoryId,
conversationId}`, as Datafari's AiRequest): `rag` answers `query` from the documents (from the
`id` document only when given), `summarize` summarizes the `id` document, `agentic` lets the
LLM call our tools step by step (service.agents) with the `agent`'s tools (agentic.agents:
`generic` is Datafari's generic agent, its tools by its names; a name not there is generic,
as Datafari falls back to it), `search` lists the
documents that match `query` (no LLM). `/ai` answers Datafari's envelope whole; `/ai/stream`
writes NDJSON, one event a line, `{"type": T, "data": {...}, "ts": <epoch ms>}`
(service.api.protocols.ndjson lists them and their order):

    stream.started, memory, phase (service.started, Rag:retrieval, ...), message.delta*,
    tool.call / tool.result / tool.error (agentic), sources.add*, sources.final,
    message.final, conversation, phase service:done, stream.completed {status: OK}

or, on a failure, `error {code, label, message, reason}`, `sources.final`, `phase
service:done`, `stream.completed {status: ERROR}`; a body that fails validation is a 200
stream too (stream.started, error 400, stream.completed). What we add to theirs (timings,
usage, abstained, cited flags) rides in extra fields of their events.

`/ai`'s statuses are Datafari's: a service error (a feature off, nothing found, no valid
answer, Solr or the LLM failing) is HTTP 200 with `status: ERROR` and `content.error {code,
label, message, reason}` (code "422", "428" or "500"); a body that fails validation is a 400
`aiBadRequest`; no key (401) and over the caller's cap (429) stay HTTP errors.

`filters.id` and `filters.fq` narrow what the request reads to the documents that pass them
(service.retrieval.facet_filter: only a facet's filters, on searchable fields), within what
the caller may see: filters never widen it. `conversationId` continues a conversation the
service keeps for its owner (service.conversations.store); an unknown or another owner's is
ignored (the question is answered, in a new conversation when they are kept). `memoryId` names
a short memory (service.conversations.memories), made when absent. The owner is the person (a
verified JWT's `sub`, the trusted proxy's `security.user.header`), else the API key
(service.api.identity); an anonymous caller owns none: nothing of its turn is kept, and the
answer says so (`notKept`), its client sending the history with each question. The turn itself
is service.actions'; this module validates the body and renders the answer.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from starlette.requests import HTTPConnection

from service.actions import Turn, TurnRequest
from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of, owner_of
from service.api.errors import documented_errors, error_response, log_failure, stays_http_error
from service.api.fields import (
    MAX_HISTORY_MESSAGES,
    MAX_MESSAGE_CHARS,
    MAX_QUERY_CHARS,
    DocumentId,
    OptionalLanguage,
)
from service.api.identity import Caller
from service.api.payload import json_route
from service.api.protocols.datafari7 import FEATURES, AiError, AiEvents, AiResponse, error_of
from service.api.protocols.driver import drive
from service.api.protocols.ndjson import NDJSON_HEADERS, NDJSON_TYPE
from service.errors import ServiceError
from service.llm import ChatMessage
from service.rag.reply import Answer
from service.snapshot import Snapshot
from service.text.language import answer_language

log = logging.getLogger(__name__)

router = APIRouter(tags=["ai"], dependencies=[Depends(require_api_key)], route_class=json_route())

Action = Literal["rag", "summarize", "agentic", "search", "synthesize"]
MAX_FILTER_IDS = 1_000
MAX_FILTER_QUERIES = 20
MAX_FILTER_FIELDS = 20  # filters' keys besides id and fq
MAX_FILTER_VALUES = 100
FILTER_FIELD = re.compile(r"[A-Za-z][\w.-]{0,99}")


class AiMessage(BaseModel):
    """An earlier message (Datafari 7 writes its text as `message`, 6.2 as `content`)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str = Field(
        max_length=MAX_MESSAGE_CHARS, validation_alias=AliasChoices("content", "message")
    )


class AiFilters(BaseModel):
    """What the request may read: these documents, those passing these filter queries, and
    those whose fields have these values (Datafari passes any other key to Solr as a raw
    parameter; we read `field: [values]` as a facet's filter, `field:("v1" OR "v2")`, on a
    field the documents collection searches, and refuse any other)."""

    model_config = ConfigDict(extra="allow")

    id: list[DocumentId] | None = Field(
        None, max_length=MAX_FILTER_IDS, description="Read only these FileShare documents."
    )
    fq: list[str] | None = Field(
        None,
        max_length=MAX_FILTER_QUERIES,
        description="Solr filter queries as a facet UI writes them (field:value, "
        'field:"phrase", field:[a TO b], field:(a OR b), joined by OR); anything else: 400.',
    )

    @model_validator(mode="after")
    def _other_keys_are_fields_with_values(self) -> AiFilters:
        others = self.model_extra or {}
        if len(others) > MAX_FILTER_FIELDS:
            raise ValueError(f"filters: at most {MAX_FILTER_FIELDS} fields besides id and fq")
        for key, values in others.items():
            if not FILTER_FIELD.fullmatch(key):
                raise ValueError(f"filters: {key[:64]!r} is not a field name")
            listed = [values] if isinstance(values, str) else values
            if (
                not isinstance(listed, list)
                or not 0 < len(listed) <= MAX_FILTER_VALUES
                or not all(isinstance(v, str) and 0 < len(v) <= 256 for v in listed)
            ):
                raise ValueError(
                    f"filters.{key}: one to {MAX_FILTER_VALUES} values, each a string of "
                    "1 to 256 characters"
                )
        return self

    def field_filters(self) -> list[str]:
        """The other keys as facet filters, `field:("v1" OR "v2")`, each value quoted: read
        again by the facet filter's grammar, which checks the field."""
        written = []
        for key, values in (self.model_extra or {}).items():
            listed = [values] if isinstance(values, str) else values
            quoted = (
                '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in listed
            )
            written.append(f"{key}:({' OR '.join(quoted)})")
        return written


class AiRequest(BaseModel):
    """The body of POST /ai and /ai/stream (Datafari 7's AiRequest)."""

    model_config = ConfigDict(extra="ignore")

    query: str | None = Field(
        None,
        max_length=MAX_QUERY_CHARS,
        validation_alias=AliasChoices("query", "q"),
        description="The question (rag, agentic).",
    )
    action: Action = Field(
        "rag", description="rag, summarize, agentic, search or synthesize (filters.id)."
    )
    id: DocumentId | None = Field(
        None, description="rag: answer from this document only; summarize: the document."
    )
    agent: str | None = Field(
        None,
        max_length=512,
        description="The agent (action=agentic): one of agentic.agents (generic: Datafari's "
        "generic agent's tools); any other name is generic, as Datafari falls back to it.",
    )
    lang: OptionalLanguage = Field(None, description="ISO code of the answer's language.")
    history: list[AiMessage] | None = Field(
        None,
        max_length=MAX_HISTORY_MESSAGES,
        description="Earlier messages (used when chat.memory.enabled, as on /ai/rag); "
        "conversationId instead lets the service keep them.",
    )
    filters: AiFilters | None = None
    conversationId: str | None = Field(  # Datafari's name
        None,
        max_length=128,
        description="A conversation a reply named: the service adds its earlier messages "
        "(an unknown one, or another caller's, is ignored).",
    )
    memoryId: str | None = Field(  # Datafari's name
        None,
        max_length=128,
        description="A memory a reply named (its last turns are read when no history is "
        "sent); made when absent.",
    )

    @model_validator(mode="before")
    @classmethod
    def _datafari_defaults(cls, value: object) -> object:
        """A null action is Datafari's default, rag (a compatibility route's: its own); an
        empty id, agent or conversationId is none (its chat bot sends "" for none)."""
        if not isinstance(value, dict):
            return value
        blanks = {
            key: None
            for key in ("id", "agent", "conversationId", "memoryId")
            if value.get(key) == ""
        }
        default = cls.model_fields["action"].default
        action = {"action": default} if value.get("action") is None else {}
        return {**value, **blanks, **action}

    def to_turn(self) -> TurnRequest:
        """What the turn asks, for service.actions (the filters' other keys as a facet's)."""
        filters = self.filters
        return TurnRequest(
            action=self.action,
            query=self.query,
            document_id=self.id,
            agent=self.agent,
            lang=self.lang,
            history=None
            if self.history is None
            else tuple(ChatMessage(m.role, m.content) for m in self.history),
            filter_ids=tuple(filters.id) if filters and filters.id else None,
            filter_queries=(*(filters.fq or ()), *filters.field_filters()) if filters else (),
            conversation_id=self.conversationId,
            memory_id=self.memoryId,
        )

    @model_validator(mode="after")
    def _what_the_action_needs(self) -> AiRequest:
        if self.action == "summarize" and self.id is None:
            raise ValueError("id is required for summarize")
        if self.action == "synthesize":
            if not (self.filters and self.filters.id):
                raise ValueError("filters.id (the documents) is required for synthesize")
            return self
        if self.action != "summarize" and not (self.query or "").strip():
            raise ValueError(f"query is required for {self.action}")
        return self


class AgenticRequest(AiRequest):
    """The body of Datafari 7's /ai/agentic: /ai's, its action agentic."""

    action: Literal["agentic"] = Field("agentic", description="agentic (this route's).")


class RagRequest7(AiRequest):
    """The body of Datafari 7's /ai/rag (datafari.api.version=7): /ai's, its action rag."""

    action: Literal["rag"] = Field("rag", description="rag (this route's).")


class SummarizeRequest7(AiRequest):
    """The body of Datafari 7's /ai/summarize (datafari.api.version=7): /ai's, summarize."""

    action: Literal["summarize"] = Field("summarize", description="summarize (this route's).")


@router.post(
    "/ai",
    response_model=AiResponse | AiError,
    responses=documented_errors(),
)
async def ai(body: AiRequest, request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """Datafari 7's AI API, answered whole: `action` rag (the answer from the documents),
    summarize (the `id` document's summary), agentic (the agent's answer, its tools called
    step by step) or search (the matching documents). A service error is HTTP 200 with
    `status: ERROR` and `content.error`, as Datafari answers it."""
    return await answered(body, request, snapshot)


@router.post("/ai/agentic", response_model=AiResponse | AiError, responses=documented_errors())
async def agentic(
    body: AgenticRequest, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """Datafari 7's compatibility route for its agents: POST /ai with action agentic."""
    return await answered(body, request, snapshot)


@router.post("/ai/7/rag", include_in_schema=False)
async def rag7(body: RagRequest7, request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """/Datafari/rest/v2.0/ai/rag with datafari.api.version=7: POST /ai with action rag."""
    return await answered(body, request, snapshot)


@router.post("/ai/7/summarize", include_in_schema=False)
async def summarize7(
    body: SummarizeRequest7, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """/Datafari/rest/v2.0/ai/summarize with datafari.api.version=7: /ai with summarize."""
    return await answered(body, request, snapshot)


async def answered(body: AiRequest, request: Request, snapshot: Snapshot) -> JSONResponse:
    """One /ai request answered whole, in Datafari 7's envelope and statuses."""
    request.state.language = answer_language(body.lang, body.query)  # for its errors
    turn = turn_of(body, request, snapshot)
    try:
        await turn.begin()
        reply = await turn.run()
        answer = reply if isinstance(reply, Answer) else await reply.complete()
        await turn.keep(answer)
    except ServiceError as error:
        log_failure(error)
        if stays_http_error(error):
            return error_response(request, error, FEATURES[body.action])
        return JSONResponse(error_of(body.action, error, request.state.language))
    response = AiResponse.of(
        answer,
        body.action,
        conversation_id=turn.conversation_id,
        memory_id=turn.memory_id,
        not_kept=turn.not_kept,
    )
    return JSONResponse(response.shown())


@router.post(
    "/ai/stream",
    responses={
        200: {
            "description": "NDJSON, Datafari 7's events: one `{type, data, ts}` a line "
            "(stream.started, memory, phase, message.delta, tool.call/result/error, "
            "sources.add, sources.final, message.final, conversation, error, "
            "stream.completed); a failure, a body that fails validation included, is an "
            "`error` event and stream.completed {status: ERROR}, in a 200.",
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        },
        **documented_errors(),
    },
)
async def ai_stream(
    body: AiRequest, request: Request, snapshot: CurrentSnapshot
) -> StreamingResponse:
    """Datafari 7's AI API, streamed as its NDJSON events (the module's docstring)."""
    language = request.state.language = answer_language(body.lang, body.query)  # for errors
    turn = turn_of(body, request, snapshot)
    lines = drive(turn, AiEvents(body.action, language), request.state.request_id)
    return StreamingResponse(lines, media_type=NDJSON_TYPE, headers=NDJSON_HEADERS)


@router.get("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """One of the caller's conversations: its messages, oldest first (another caller's: 404)."""
    found = await snapshot.conversations.get(owner_of(request), conversation_id[:128])
    messages = [{"role": m.role, "content": m.content} for m in found.messages]
    return JSONResponse(
        {"status": "OK", "content": {"conversationId": found.id, "messages": messages}}
    )


@router.delete("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def delete_conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """Deletes one of the caller's conversations, at once (another caller's: 404)."""
    await snapshot.conversations.delete(owner_of(request), conversation_id[:128])
    return JSONResponse({"status": "OK", "content": {"conversationId": conversation_id}})


def turn_of(
    body: AiRequest, connection: HTTPConnection, snapshot: Snapshot, caller: Caller | None = None
) -> Turn:
    """The request's turn, for `caller` (a socket's, identified again at each turn), else the
    one the door identified for the request (service.api.door)."""
    caller = caller or caller_of(connection)
    runtime = connection.app.state.runtime
    return Turn(
        body.to_turn(),
        snapshot,
        scope=caller.scope,
        owner=caller.owner,
        memories=runtime.memories,
    )
