"""POST /ai and /ai/stream: Datafari 7's AI API, the one its chat bot calls, as its code
speaks it (francelabs/datafari: AiPowered, ChatStream, NdjsonChatStream, StreamToolExecutor).

One body for every action (`{query, action, id, agent, lang, history, filters, memoryId,
conversationId}`, as Datafari's AiRequest): `rag` answers `query` from the documents (from the
`id` document only when given), `summarize` summarizes the `id` document, `agentic` lets the
LLM call our tools step by step (service.agentic) with the `agent`'s tools (agentic.agents:
`generic` is Datafari's generic agent, its tools by its names; a name not there is generic,
as Datafari falls back to it), `search` lists the
documents that match `query` (no LLM). `/ai` answers Datafari's envelope whole; `/ai/stream`
writes NDJSON, one event a line, `{"type": T, "data": {...}, "ts": <epoch ms>}`
(service.api.ai_events lists them and their order):

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
service keeps for its owner (service.conversations); an unknown or another owner's is ignored
(the question is answered, in a new conversation when they are kept). `memoryId` names a short
memory kept in the process (service.memories), made when absent. The owner is the person
(a verified JWT's `sub`, the trusted proxy's `security.user.header`), else the API key
(service.api.identity); an anonymous caller owns none: nothing of its turn is kept, and the
answer says so (`notKept`), its client sending the history with each question.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from service.agentic import Agent, ToolEvent, protocol_for
from service.api.ai_events import NDJSON_HEADERS, NDJSON_TYPE, EventStream
from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import (
    ErrorContent,
    ai_error_body,
    as_service_error,
    documented_errors,
    error_response,
    log_failure,
    stays_http_error,
)
from service.api.fields import DocumentId, OptionalLanguage
from service.api.identity import Caller
from service.api.payload import json_route
from service.api.rag import MAX_HISTORY_MESSAGES, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS, UsageOut
from service.api.sources import SourceOut, sources_of, summary_sources
from service.config.settings import agents_of
from service.conversations import TITLE_CHARS, Conversation, ConversationStore
from service.conversations.memories import KeptMemories, Memories, Memory
from service.custom_tools import custom_tools
from service.errors import (
    ConversationNotFound,
    FeatureDisabled,
    ServiceError,
    Unauthorized,
)
from service.llm import ChatMessage
from service.rag import assemble
from service.rag.options import RequestOptions
from service.rag.reply import Answer, AnswerDocument, Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.synthesis import SynthesisQuery, synthesize
from service.retrieval import Scope
from service.retrieval.base import RetrievedDocument
from service.retrieval.facet_filter import documents_matching
from service.snapshot import Snapshot
from service.text.language import answer_language

log = logging.getLogger(__name__)

router = APIRouter(tags=["ai"], dependencies=[Depends(require_api_key)], route_class=json_route())

Action = Literal["rag", "summarize", "agentic", "search", "synthesize"]
# Datafari's label prefix of each action's errors
FEATURES: dict[str, str] = {
    "rag": "rag",
    "summarize": "summarization",
    "agentic": "agentic",
    "search": "rag",
    "synthesize": "synthesis",
}
# what an anonymous caller is told of its conversation and memory (nothing is kept)
NOT_KEPT = (
    "an anonymous caller keeps no conversation or memory on the server: send the history with "
    "each question, or an API key or identity token"
)
SEARCH_RESULTS = 5  # Datafari's search action lists this many documents
SEARCH_DEPTH = 3  # passages read for each document it lists (several may be one document's)
DOC_CHARS = 300  # of a document's text in the search action's docs, as Datafari cuts it
SOURCE_CHARS = 200  # of a source's text in Datafari 7's `sources`
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


class AiSource(BaseModel):
    """A source as Datafari 7 lists it (`content`: its first 200 characters), with whether
    the answer cites it (ours)."""

    id: str
    title: str
    url: str
    content: str
    cited: bool = False

    @classmethod
    def of(cls, source: SourceOut) -> AiSource:
        text = source.content
        cut = text if len(text) <= SOURCE_CHARS else text[:SOURCE_CHARS] + "…"
        return cls(id=source.id, title=source.title, url=source.url, content=cut,
                   cited=source.cited)  # fmt: skip


class AiContent(BaseModel):
    """The answer, its sources (Datafari 7's `sources`; ours whole, as `documents`), the
    conversation and memory it belongs to."""

    message: str
    sources: list[AiSource]
    documents: list[SourceOut]
    docs: list[dict[str, str]] | None = Field(
        None, description="action search: the documents found, as Datafari lists them."
    )
    conversationId: str | None = None
    memoryId: str | None = None
    notKept: str | None = Field(
        None,
        description="Why neither a conversation nor a memory was kept (an anonymous "
        "caller's: its client sends the history with each question).",
    )


class AiResponse(BaseModel):
    """The answer of POST /ai, in Datafari's envelope (with our timings, usage, abstained);
    nulls are left out, as Datafari's are."""

    status: Literal["OK"] = "OK"
    content: AiContent
    timings: dict[str, float]
    usage: UsageOut
    abstained: str | None = None

    @classmethod
    def of(cls, answer: Answer, turn: Turn) -> AiResponse:
        summary = turn.body.action == "summarize"
        documents = summary_sources(answer) if summary else sources_of(answer)
        return cls(
            content=AiContent(
                message=answer.message,
                sources=[AiSource.of(source) for source in documents],
                documents=documents,
                docs=found_docs(answer) if turn.body.action == "search" else None,
                conversationId=turn.conversation_id,
                memoryId=turn.memory.id if turn.memory else None,
                notKept=turn.kept,
            ),
            timings=answer.timings,
            usage=UsageOut.of(answer),
            abstained=answer.abstained,
        )

    def shown(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)


class AiErrorContent(BaseModel):
    """The error, and the 6.2 fields beside it; no sources."""

    error: ErrorContent  # Datafari's code: "422", "428" or "500"
    message: str
    sources: list[AiSource]
    documents: list[SourceOut]


class AiError(BaseModel):
    """A service error of POST /ai, answered with HTTP 200 as Datafari answers it."""

    status: Literal["ERROR"]
    content: AiErrorContent


class Turn:
    """One /ai request: its scope (the caller's rights, narrowed by the filters), its
    conversation and memory, and the pipeline its action runs."""

    def __init__(
        self, body: AiRequest, request: Request, snapshot: Snapshot, caller: Caller
    ) -> None:
        self.body = body
        self.snapshot = snapshot
        self.request = request
        self.caller = caller  # as the door identified it (service.api.door)
        self.conversation: Conversation | None = None
        self.memory: Memory | None = None
        self.status = 200  # the HTTP status of its failure, once it failed

    @property
    def kept(self) -> str | None:
        """Why nothing of this turn is kept on the server, when nothing is."""
        if self.caller.owner is None:
            return NOT_KEPT
        return None

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    @property
    def asked(self) -> str:
        """What the turn asked, as a conversation keeps it."""
        if self.body.query:
            return self.body.query
        if self.body.action == "synthesize":
            return "Write a synthesis of these documents"  # Datafari's words
        return f"Summarize the document {self.body.id}"

    @property
    def title(self) -> str:
        """The conversation's title as it is kept (its first question's first 50 characters,
        or what its owner renamed it to), as Datafari sends it: never the current question's."""
        if self.conversation is not None and self.conversation.title:
            return self.conversation.title
        return self.asked[:TITLE_CHARS]

    async def begin(self) -> None:
        """The memory, and the conversation: the one named, else a new one when conversations
        are kept; one that is not the caller's (unknown, expired, another's) is ignored. An
        anonymous caller owns none: its question is answered from the history it sends."""
        owner = self.caller.owner
        if owner is None:
            return
        settings = self.snapshot.settings
        if settings.conversations.enabled:  # kept in Solr: any worker reads it
            self.memory = await KeptMemories(store_of(self.snapshot)).open(
                owner, self.body.memoryId
            )
        else:
            self.memory = memories_of(self.request).open(owner, self.body.memoryId)
        named = self.body.conversationId
        if not settings.conversations.enabled:
            return  # a conversationId is answered without one, as Datafari does
        store = store_of(self.snapshot)
        try:
            self.conversation = await store.open(owner, named)
        except ConversationNotFound:
            log.info("conversationId %r is not the caller's: a new conversation", named[:32])
            self.conversation = await store.open(owner, None)

    @property
    def history(self) -> tuple[ChatMessage, ...]:
        """What was said before: the posted history, else the conversation, else the memory."""
        if self.body.history is not None:
            return tuple(ChatMessage(m.role, m.content) for m in self.body.history)
        if self.conversation and self.conversation.messages:
            return self.conversation.messages
        return tuple(self.memory.messages) if self.memory else ()

    async def run(
        self,
        progress: assemble.Progress | None = None,
        on_tool: Callable[[ToolEvent], None] | None = None,
    ) -> Reply | Answer:
        """Everything up to the last LLM request of the action (an agent's whole answer, a
        search's documents)."""
        body, snapshot = self.body, self.snapshot
        scope = await self._scope()
        if body.action == "summarize":
            query = SummarizeQuery(document_id=body.id, lang=body.lang, scope=scope)
            return await assemble.summarize(snapshot, query, progress)
        if body.action == "search":
            return await self._search(scope, progress)
        if body.action == "synthesize":
            return await self._synthesize(scope, progress)
        history = self.history
        if body.action == "agentic":
            return await self._agent(scope, progress, on_tool).run(body.query or "", history)
        query = RagQuery(
            query=body.query or "",
            document_id=body.id,
            lang=body.lang,
            history=history,
            scope=scope,
            # what the service keeps (a conversation, a memory) is always read; a posted
            # history only with chat.memory.enabled, as on /ai/rag
            options=RequestOptions(always_use_history=body.history is None and bool(history)),
        )
        return await assemble.ask(snapshot, query, progress)

    async def _search(self, scope: Scope, progress: assemble.Progress | None) -> Answer:
        """Datafari's search action: the documents that match, no answer written."""
        if progress:
            progress("search")
        started = time.perf_counter()
        # passages (hybrid, vector) are read by their documents: one result a document
        retriever = self.snapshot.index_retriever(scope, SEARCH_RESULTS * SEARCH_DEPTH)
        first: dict[str, RetrievedDocument] = {}
        for found in await retriever.run(self.body.query or ""):
            first.setdefault(found.source_id, found)  # a document's best passage
        listed = list(first.values())[:SEARCH_RESULTS]
        documents = [
            AnswerDocument(d.source_id, d.title, d.url, d.content, number, cited=False)
            for number, d in enumerate(listed, start=1)
        ]
        took = round((time.perf_counter() - started) * 1000, 1)
        return Answer(message="", documents=documents, timings={"search": took})

    async def _synthesize(self, scope: Scope, progress: assemble.Progress | None) -> Answer:
        """Datafari's synthesis of the filters' documents (service.rag.synthesis), within
        what the caller may see narrowed by the filters (`scope`)."""
        ids = tuple(self.body.filters.id or ()) if self.body.filters else ()
        query = SynthesisQuery(ids, self.body.query or "", self.body.lang, scope)
        return await synthesize(self.snapshot, query, progress)

    def _agent(
        self,
        scope: Scope,
        progress: assemble.Progress | None,
        on_tool: Callable[[ToolEvent], None] | None,
    ) -> Agent:
        """The agent the request names (agentic.agents; `custom`: the tools of
        agentic-custom-tools.json beside rag.properties, as Datafari's custom agent); none: the
        first; any other name (Datafari's `rag` among them): `generic`, Datafari's fallback,
        when there is one, else the first."""
        settings = self.snapshot.settings.agentic
        if not settings.enabled:
            raise FeatureDisabled("agentic.enabled is false in rag.properties")
        agents = agents_of(settings.agents)
        named = self.body.agent
        if named == "custom" and "custom" not in agents:
            folder = self.request.app.state.runtime.config.path.parent
            custom = custom_tools(folder)  # Datafari's agentic-custom-tools.json, if any
            if custom:
                return Agent(self.snapshot, scope, tools=tuple(custom), custom=custom,
                             max_steps=settings.max_steps, lang=self.body.lang,
                             protocol=protocol_for(self.snapshot.settings), progress=progress,
                             on_tool=on_tool)  # fmt: skip
        if named is None or named not in agents:
            # none named: the first; any other name (Datafari's rag...): its fallback, generic
            fallback = "generic" if named is not None and "generic" in agents else None
            named = fallback or next(iter(agents))
        return Agent(self.snapshot, scope, tools=agents[named], max_steps=settings.max_steps,
                     lang=self.body.lang, protocol=protocol_for(self.snapshot.settings),
                     progress=progress, on_tool=on_tool)  # fmt: skip

    async def remember(self, answer: Answer) -> None:
        """The question and its answer, kept in the memory and the conversation."""
        question = self.asked
        if self.memory is not None and answer.message:
            if self.memory.kept is not None:
                await KeptMemories(store_of(self.snapshot)).remember(
                    self.memory, question, answer.message
                )
            else:
                memories_of(self.request).remember(self.memory, question, answer.message)
        if self.conversation is None:
            return
        self.conversation = await store_of(self.snapshot).append(
            self.conversation, question, answer.message
        )

    async def _scope(self) -> Scope:
        """The caller's scope narrowed by the request's filters."""
        settings = self.snapshot.settings
        scope = self.caller.scope
        filters = self.body.filters
        ids = (filters.id or None) if filters else None  # Datafari sends [] for no filter
        queries = [*(filters.fq or ()), *filters.field_filters()] if filters else []
        if filters is None or (ids is None and not queries):
            return scope
        if not queries:
            return scope.within(ids or ())
        layout = settings.solr
        documents = await documents_matching(
            self.snapshot.solr,
            layout.documents_collection,
            layout.documents_map,
            scope,
            queries,
            ids,
        )
        return scope.within(documents)


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
    turn = Turn(body, request, snapshot, caller_of(request))
    try:
        await turn.begin()
        reply = await turn.run()
        answer = reply if isinstance(reply, Answer) else await reply.complete()
        await turn.remember(answer)
    except ServiceError as error:
        log_failure(error)
        if stays_http_error(error):
            return error_response(request, error, FEATURES[body.action])
        language = request.state.language
        return JSONResponse(ai_error_body(FEATURES[body.action], error, language))
    return JSONResponse(AiResponse.of(answer, turn).shown())


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
    request.state.language = answer_language(body.lang, body.query)  # for its errors
    turn = Turn(body, request, snapshot, caller_of(request))
    return StreamingResponse(turn_events(turn), media_type=NDJSON_TYPE, headers=NDJSON_HEADERS)


@router.get("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """One of the caller's conversations: its messages, oldest first (another caller's: 404)."""
    found = await store_of(snapshot).get(owner_of(request), conversation_id[:128])
    messages = [{"role": m.role, "content": m.content} for m in found.messages]
    return JSONResponse(
        {"status": "OK", "content": {"conversationId": found.id, "messages": messages}}
    )


@router.delete("/ai/conversations/{conversation_id}", responses=documented_errors(403, 404))
async def delete_conversation(
    conversation_id: str, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """Deletes one of the caller's conversations, at once (another caller's: 404)."""
    await store_of(snapshot).delete(owner_of(request), conversation_id[:128])
    return JSONResponse({"status": "OK", "content": {"conversationId": conversation_id}})


def found_docs(answer: Answer) -> list[dict[str, str]]:
    """What Datafari's search action lists: each document's id, title, url, and its text's
    first DOC_CHARS characters."""

    def cut(text: str) -> str:
        return text if len(text) <= DOC_CHARS else text[: DOC_CHARS - 3] + "..."

    return [
        {"docId": d.id, "title": d.title, "url": d.url, "content": cut(d.content)}
        for d in answer.documents
    ]


def memories_of(request: Request) -> Memories:
    return request.app.state.runtime.memories


def store_of(snapshot: Snapshot) -> ConversationStore:
    return ConversationStore(snapshot.solr, snapshot.settings.conversations)


def owner_of(request: Request) -> str:
    """Whose conversations the caller reads (service.api.identity: the person, else the key);
    Unauthorized for an anonymous caller, who owns none."""
    owner = caller_of(request).owner
    if owner is None:
        raise Unauthorized(
            "the conversations are an authenticated caller's: send an API key (api.keys) or "
            "an identity token naming its person (security.identity=jwt, with a sub)"
        )
    return owner


async def turn_events(turn: Turn) -> AsyncIterator[str]:
    """Datafari 7's events for one turn (service.api.ai_events), its failure included: the
    lines of /ai/stream, the messages of /ai/ws."""
    action = turn.body.action
    stream = EventStream()
    yield stream.started()
    try:
        await turn.begin()
        yield stream.memory(turn.memory.id if turn.memory else "", turn.kept)
        yield stream.phase("service.started")
        if turn.history and action in ("rag", "agentic"):
            yield stream.phase("Rag:retrieving chat history")
        steps: asyncio.Queue[str | ToolEvent] = asyncio.Queue()
        running = asyncio.ensure_future(turn.run(steps.put_nowait, steps.put_nowait))
        try:
            while not running.done() or not steps.empty():
                waiting = asyncio.ensure_future(steps.get())
                await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    for line in stream.progress(waiting.result(), action):
                        yield line
                else:
                    waiting.cancel()
            reply = running.result()
        finally:
            running.cancel()
        if isinstance(reply, Answer):  # an agent's or a search's: written whole
            answer = reply
        else:
            async for text in reply:
                yield stream.delta(text)
            answer = await reply.answer()
        await turn.remember(answer)
        response = AiResponse.of(answer, turn)
        for line in stream.sources(response.content.sources, response.content.docs):
            yield line
        if answer.message:
            extras = response.shown()
            yield stream.final(answer.message, timings=extras["timings"], usage=extras["usage"],
                               abstained=answer.abstained)  # fmt: skip
        if turn.conversation_id:
            yield stream.conversation(turn.conversation_id, turn.title)
        yield stream.phase("service:done")
        yield stream.completed("OK")
    except Exception as error:  # the stream has begun: the error, then its end
        failure = as_service_error(error, turn.request.state.request_id)
        turn.status = failure.status
        language = turn.request.state.language  # the route's (answer_language)
        for line in stream.failed(failure, FEATURES[action], language):
            yield line
