"""POST /ai and /ai/stream: Datafari 7's AI API, the one its chat bot calls.

One body for every action (`{query, action, id, agent, lang, history, filters,
conversationId}`, as Datafari's AiRequest): `rag` answers `query` from the documents (from the
`id` document only when given), `summarize` summarizes the `id` document, `agentic` lets the
LLM call our tools step by step (service.agentic) with the `agent`'s tools (agentic.agents).
`/ai` answers Datafari's envelope whole; `/ai/stream` writes NDJSON, one JSON object a line,
each with a `type`:

    {"type": "start", "action": "rag", "conversationId": "..."}
    {"type": "step", "step": "retrieve"}                  one a stage, as it begins
    {"type": "token", "text": "The lamp "}                the answer as the LLM writes it
    {"type": "sources", "documents": [...]}
    {"type": "done", "status": "OK", "content": {...}, "timings": {...}, "usage": {...}}
    {"type": "error", "status": "ERROR", "content": {...}}  instead of done, if it fails

`filters.id` and `filters.fq` narrow what the request reads to the documents that pass them
(service.retrieval.facet_filter: only a facet's filters, on searchable fields), within what
the caller may see: filters never widen it. `conversationId` continues a conversation the
service keeps for its caller (service.conversations); a reply names it.

Errors answer Datafari 7's envelope: `content.error {code, label, message, reason}` (and the
6.2 fields beside it), labelled by the action (`ragNoFileFound`, `summarizationNoFileFound`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from functools import cached_property
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from service.agentic import Agent, protocol_for
from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.errors import (
    as_service_error,
    body_of,
    documented_errors,
    error_response,
    log_failure,
)
from service.api.fields import DocumentId, OptionalLanguage
from service.api.identity import caller_scope
from service.api.llm_work import caller_of
from service.api.payload import json_route
from service.api.rag import MAX_HISTORY_MESSAGES, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS, UsageOut
from service.api.sources import SourceOut, sources_of, summary_sources
from service.api.sse import SSE_HEADERS
from service.config.settings import agents_of
from service.conversations import Conversation, ConversationStore
from service.errors import AgentNotFound, FeatureDisabled, ServiceError
from service.llm import ChatMessage
from service.rag import assemble
from service.rag.options import RequestOptions
from service.rag.reply import Answer, Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.retrieval import Scope
from service.retrieval.facet_filter import documents_matching
from service.snapshot import Snapshot
from service.text.language import answer_language

router = APIRouter(tags=["ai"], dependencies=[Depends(require_api_key)], route_class=json_route())

Action = Literal["rag", "summarize", "agentic"]
# Datafari's label prefix of each action's errors
FEATURES: dict[str, str] = {"rag": "rag", "summarize": "summarization", "agentic": "agentic"}
MAX_FILTER_IDS = 1_000
MAX_FILTER_QUERIES = 20
NDJSON = "application/x-ndjson"


class AiMessage(BaseModel):
    """An earlier message (Datafari 7 writes its text as `message`, 6.2 as `content`)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant", "system"]
    content: str = Field(
        max_length=MAX_MESSAGE_CHARS, validation_alias=AliasChoices("content", "message")
    )


class AiFilters(BaseModel):
    """What the request may read: these documents, and those passing these filter queries."""

    model_config = ConfigDict(extra="ignore")

    id: list[DocumentId] | None = Field(
        None, max_length=MAX_FILTER_IDS, description="Read only these FileShare documents."
    )
    fq: list[str] | None = Field(
        None,
        max_length=MAX_FILTER_QUERIES,
        description="Solr filter queries as a facet UI writes them (field:value, "
        'field:"phrase", field:[a TO b], field:(a OR b), joined by OR); anything else: 400.',
    )


class AiRequest(BaseModel):
    """The body of POST /ai and /ai/stream (Datafari 7's AiRequest)."""

    model_config = ConfigDict(extra="ignore")

    query: str | None = Field(
        None,
        max_length=MAX_QUERY_CHARS,
        validation_alias=AliasChoices("query", "q"),
        description="The question (rag, agentic).",
    )
    action: Action = Field("rag", description="rag, summarize or agentic.")
    id: DocumentId | None = Field(
        None, description="rag: answer from this document only; summarize: the document."
    )
    agent: str | None = Field(None, max_length=512, description="The agent (action=agentic).")
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
        description="A conversation a reply named: the service adds its earlier messages.",
    )

    @model_validator(mode="before")
    @classmethod
    def _datafari_defaults(cls, value: object) -> object:
        """A null action is Datafari's default, rag; an empty id, agent or conversationId is
        none (its chat bot sends "" for none)."""
        if not isinstance(value, dict):
            return value
        blanks = {key: None for key in ("id", "agent", "conversationId") if value.get(key) == ""}
        action = {"action": "rag"} if value.get("action") is None else {}
        return {**value, **blanks, **action}

    @model_validator(mode="after")
    def _what_the_action_needs(self) -> AiRequest:
        if self.action == "summarize" and self.id is None:
            raise ValueError("id is required for summarize")
        if self.action != "summarize" and not (self.query or "").strip():
            raise ValueError(f"query is required for {self.action}")
        return self


class AiContent(BaseModel):
    """The answer, its sources (as `documents`, and as Datafari 7's `sources`), and the
    conversation it belongs to."""

    message: str
    documents: list[SourceOut]
    sources: list[SourceOut]
    conversationId: str | None = None


class AiResponse(BaseModel):
    """The answer of POST /ai, in Datafari's envelope (with our timings, usage, abstained)."""

    status: Literal["OK"] = "OK"
    content: AiContent
    timings: dict[str, float]
    usage: UsageOut
    abstained: str | None = None

    @classmethod
    def of(cls, answer: Answer, conversation_id: str | None, *, summary: bool) -> AiResponse:
        documents = summary_sources(answer) if summary else sources_of(answer)
        return cls(
            content=AiContent(
                message=answer.message,
                documents=documents,
                sources=documents,
                conversationId=conversation_id,
            ),
            timings=answer.timings,
            usage=UsageOut.of(answer),
            abstained=answer.abstained,
        )


class Turn:
    """One /ai request: its scope (the caller's rights, narrowed by the filters), its
    conversation, and the pipeline its action runs."""

    def __init__(self, body: AiRequest, request: Request, snapshot: Snapshot) -> None:
        self.body = body
        self.snapshot = snapshot
        self.request = request
        self.conversation: Conversation | None = None

    @cached_property
    def caller(self) -> Scope:
        """What the caller may see (made once: it may verify a JWT)."""
        return caller_scope(self.request, self.snapshot.settings.security)

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    async def begin(self) -> None:
        """The conversation (a new one when conversations are kept and none is named)."""
        settings = self.snapshot.settings
        if self.body.conversationId is None and not settings.conversations.enabled:
            return
        self.conversation = await store_of(self.snapshot).open(
            owner_of(self.request, self.snapshot, self.caller), self.body.conversationId
        )

    async def run(self, progress: assemble.Progress | None = None) -> Reply | Answer:
        """Everything up to the last LLM request of the action (an agent's whole answer)."""
        body, snapshot = self.body, self.snapshot
        scope = await self._scope()
        if body.action == "summarize":
            query = SummarizeQuery(document_id=body.id, lang=body.lang, scope=scope)
            return await assemble.summarize(snapshot, query, progress)
        kept = self.conversation.messages if self.conversation else ()
        history = (
            kept
            if body.history is None
            else tuple(ChatMessage(m.role, m.content) for m in body.history)
        )
        if body.action == "agentic":
            return await self._agent(scope, progress).run(body.query or "", history)
        query = RagQuery(
            query=body.query or "",
            document_id=body.id,
            lang=body.lang,
            history=history,
            scope=scope,
            # a conversation the service keeps is always read; a posted history only with
            # chat.memory.enabled, as on /ai/rag
            options=RequestOptions(always_use_history=body.history is None and bool(kept)),
        )
        return await assemble.ask(snapshot, query, progress)

    def _agent(self, scope: Scope, progress: assemble.Progress | None) -> Agent:
        """The agent the request names (agentic.agents; none named: the first)."""
        settings = self.snapshot.settings.agentic
        if not settings.enabled:
            raise FeatureDisabled("agentic.enabled is false in rag.properties")
        agents = agents_of(settings.agents)
        name = self.body.agent or next(iter(agents))
        if name not in agents:
            raise AgentNotFound(
                f"agent {name[:100]!r} is not one of agentic.agents ({', '.join(agents)})"
            )
        return Agent(self.snapshot, scope, tools=agents[name], max_steps=settings.max_steps,
                     lang=self.body.lang, protocol=protocol_for(self.snapshot.settings),
                     progress=progress)  # fmt: skip

    async def remember(self, answer: Answer) -> None:
        """The question and its answer, kept in the conversation."""
        if self.conversation is None:
            return
        question = self.body.query or f"Summarize the document {self.body.id}"
        await store_of(self.snapshot).append(self.conversation, question, answer.message)

    async def _scope(self) -> Scope:
        """The caller's scope narrowed by the request's filters."""
        settings = self.snapshot.settings
        scope = self.caller
        filters = self.body.filters
        ids = (filters.id or None) if filters else None  # Datafari sends [] for no filter
        if filters is None or (ids is None and not filters.fq):
            return scope
        if not filters.fq:
            return scope.within(ids or ())
        layout = settings.solr
        documents = await documents_matching(
            self.snapshot.solr,
            layout.documents_collection,
            layout.documents_map,
            scope,
            filters.fq,
            ids,
        )
        return scope.within(documents)


@router.post(
    "/ai",
    response_model=AiResponse,
    responses=documented_errors(403, 404, 428),
)
async def ai(body: AiRequest, request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """Datafari 7's AI API, answered whole: `action` rag (the answer from the documents),
    summarize (the `id` document's summary) or agentic (the agent's answer, its tools called
    step by step)."""
    request.state.language = answer_language(body.lang, body.query)  # for its errors
    turn = Turn(body, request, snapshot)
    try:
        await turn.begin()
        reply = await turn.run()
        answer = reply if isinstance(reply, Answer) else await reply.complete()
        await turn.remember(answer)
    except ServiceError as error:
        log_failure(error)
        return error_response(request, error, FEATURES[body.action])
    response = AiResponse.of(answer, turn.conversation_id, summary=body.action == "summarize")
    return JSONResponse(response.model_dump(mode="json"))


@router.post(
    "/ai/stream",
    responses={
        200: {
            "description": "NDJSON: one JSON object a line, each with a `type`: start, step "
            "(one a stage), token ({text}), sources ({documents}), then done (the envelope "
            "of POST /ai, with timings and usage) or error (the error envelope).",
            "content": {NDJSON: {"schema": {"type": "string"}}},
        },
        **documented_errors(),
    },
)
async def ai_stream(
    body: AiRequest, request: Request, snapshot: CurrentSnapshot
) -> StreamingResponse:
    """Datafari 7's AI API, streamed as NDJSON events (the module's docstring lists them)."""
    request.state.language = answer_language(body.lang, body.query)  # for its errors
    turn = Turn(body, request, snapshot)
    return StreamingResponse(
        _events(turn, request.state.request_id), media_type=NDJSON, headers=SSE_HEADERS
    )


@router.get("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """One of the caller's conversations: its messages, oldest first (another caller's: 404)."""
    found = await store_of(snapshot).get(owner_of(request, snapshot), conversation_id[:128])
    messages = [{"role": m.role, "content": m.content} for m in found.messages]
    return JSONResponse(
        {"status": "OK", "content": {"conversationId": found.id, "messages": messages}}
    )


@router.delete("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def delete_conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """Deletes one of the caller's conversations, at once (another caller's: 404)."""
    await store_of(snapshot).delete(owner_of(request, snapshot), conversation_id[:128])
    return JSONResponse({"status": "OK", "content": {"conversationId": conversation_id}})


def store_of(snapshot: Snapshot) -> ConversationStore:
    return ConversationStore(snapshot.solr, snapshot.settings.conversations)


def owner_of(request: Request, snapshot: Snapshot, scope: Scope | None = None) -> str:
    """Who a conversation belongs to: the caller (its API key, JWT subject or address), and
    its groups when security is on (`scope`: the caller's, when already made)."""
    settings = snapshot.settings
    groups = (scope or caller_scope(request, settings.security)).groups
    shown = "" if groups is None else ",".join(sorted(groups))
    return f"{caller_of(request, settings)}|{shown}"


async def _events(turn: Turn, request_id: str) -> AsyncIterator[str]:
    action = turn.body.action
    try:
        await turn.begin()
        yield _line({"type": "start", "action": action, "conversationId": turn.conversation_id})
        steps: asyncio.Queue[str] = asyncio.Queue()
        running = asyncio.ensure_future(turn.run(steps.put_nowait))
        try:
            while not running.done() or not steps.empty():
                waiting = asyncio.ensure_future(steps.get())
                await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    yield _line({"type": "step", "step": waiting.result()})
                else:
                    waiting.cancel()
            reply = running.result()
        finally:
            running.cancel()
        if isinstance(reply, Answer):  # an agent's: written whole
            answer = reply
            yield _line({"type": "token", "text": answer.message})
        else:
            async for text in reply:
                yield _line({"type": "token", "text": text})
            answer = await reply.answer()
        await turn.remember(answer)
        response = AiResponse.of(answer, turn.conversation_id, summary=action == "summarize")
        documents = [source.model_dump() for source in response.content.documents]
        yield _line({"type": "sources", "documents": documents})
        yield _line({"type": "done", **response.model_dump(mode="json")})
    except Exception as error:  # the stream has begun: the error becomes its last line
        failure = as_service_error(error, request_id)
        language = turn.request.state.language  # the route's (answer_language)
        yield _line({"type": "error", **body_of("/ai/stream", failure, FEATURES[action], language)})


def _line(event: dict[str, object]) -> str:
    return json.dumps(event, ensure_ascii=False) + "\n"
