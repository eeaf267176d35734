"""Datafari 7's AI API: the answer whole in its envelope (`{status, content: {message,
sources, documents, docs?, conversationId, memoryId}}`, a service error a 200 with `status:
ERROR`), or its NDJSON events (service.api.protocols.ndjson writes the lines; /ai/stream and
/ai/ws send them). Ours beside theirs, in fields a Datafari client ignores: timings, usage,
abstained, confidence, grounding, cached."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from service.actions.progress import Kept, Opened, Step
from service.api.grounding import GroundingOut
from service.api.protocols.answer import AnswerFields, ConfidenceOut, UsageOut
from service.api.protocols.envelopes import ErrorContent, ai_error_body
from service.api.protocols.ndjson import EventStream
from service.api.sources import SourceOut
from service.errors import ServiceError
from service.rag.reply import Answer

# Datafari's label prefix of each action's errors
FEATURES: dict[str, str] = {
    "rag": "rag",
    "summarize": "summarization",
    "agentic": "agentic",
    "search": "rag",
    "synthesize": "synthesis",
}
DOC_CHARS = 300  # of a document's text in the search action's docs, as Datafari cuts it
SOURCE_CHARS = 200  # of a source's text in Datafari 7's `sources`


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
    """The answer of POST /ai, in Datafari's envelope (with our timings, usage, abstained,
    confidence, grounding, cached); nulls are left out, as Datafari's are."""

    status: Literal["OK"] = "OK"
    content: AiContent
    timings: dict[str, float]
    usage: UsageOut
    abstained: str | None = None
    confidence: ConfidenceOut | None = None
    grounding: GroundingOut | None = None
    cached: bool | None = Field(None, description="true for an answer from the answer cache.")
    cache_age: float | None = None

    @classmethod
    def of(
        cls,
        answer: Answer,
        action: str,
        *,
        conversation_id: str | None = None,
        memory_id: str | None = None,
        not_kept: str | None = None,
    ) -> AiResponse:
        fields = AnswerFields.of(answer, summary=action == "summarize")
        return cls(
            content=AiContent(
                message=fields.message,
                sources=[AiSource.of(source) for source in fields.sources],
                documents=fields.sources,
                docs=found_docs(answer) if action == "search" else None,
                conversationId=conversation_id,
                memoryId=memory_id,
                notKept=not_kept,
            ),
            timings=fields.timings,
            usage=fields.usage,
            abstained=fields.abstained,
            confidence=fields.confidence,
            grounding=fields.grounding,
            cached=True if fields.cached else None,
            cache_age=fields.cache_age,
        )

    def shown(self) -> dict[str, Any]:
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


def found_docs(answer: Answer) -> list[dict[str, str]]:
    """What Datafari's search action lists: each document's id, title, url, and its text's
    first DOC_CHARS characters."""

    def cut(text: str) -> str:
        return text if len(text) <= DOC_CHARS else text[: DOC_CHARS - 3] + "..."

    return [
        {"docId": d.id, "title": d.title, "url": d.url, "content": cut(d.content)}
        for d in answer.documents
    ]


def error_of(action: str, error: ServiceError, language: str | None) -> dict[str, object]:
    """A service error of /ai whole: Datafari 7's envelope (service.api.errors)."""
    return ai_error_body(FEATURES[action], error, language)


class AiEvents:
    """Datafari 7's NDJSON events of one turn, for the stream driver: stream.started, memory,
    phases, tool events, message.delta, sources.add / search.results / sources.final,
    message.final, conversation, service:done, stream.completed (or, on a failure, error,
    sources.final [], service:done, stream.completed ERROR)."""

    def __init__(self, action: str, language: str | None) -> None:
        self.action = action
        self.language = language
        self.lines = EventStream()
        self.status = 200  # the HTTP status of its failure, once it failed

    def started(self) -> Iterator[str]:
        yield self.lines.started()

    def progress(self, step: Step) -> Iterator[str]:
        lines = self.lines
        if isinstance(step, Opened):
            yield lines.memory(step.memory_id, step.not_kept)
            yield lines.phase("service.started")
            if step.history and self.action in ("rag", "agentic"):
                yield lines.phase("Rag:retrieving chat history")
        elif isinstance(step, Kept):
            yield lines.conversation(step.conversation_id, step.title)
        else:
            yield from lines.progress(step, self.action)

    def delta(self, text: str) -> Iterator[str]:
        yield self.lines.delta(text)

    def final(self, answer: Answer) -> Iterator[str]:
        response = AiResponse.of(answer, self.action)
        content = response.content
        sources = [source.model_dump() for source in content.sources]
        yield from self.lines.sources(sources, content.docs)
        if answer.message:
            shown = response.shown()
            yield self.lines.final(
                answer.message,
                timings=shown["timings"],
                usage=shown["usage"],
                abstained=answer.abstained,
                confidence=shown.get("confidence"),
                grounding=shown.get("grounding"),
                cached=shown.get("cached"),
            )

    def ended(self) -> Iterator[str]:
        yield self.lines.phase("service:done")
        yield self.lines.completed("OK")

    def failed(self, error: ServiceError) -> Iterator[str]:
        self.status = error.status
        yield from self.lines.failed(error, FEATURES[self.action], self.language)

    def idle(self) -> Iterator[str]:
        return iter(())  # NDJSON has no line that says nothing; its phases show the work
