"""Datafari 6.2's RagAPI: the answer whole in its envelope `{status, content: {message,
documents}}` (ours beside it: timings, usage, grounding, cached, abstained, confidence), or as
Server-Sent Events: `token` ({text}) as the LLM writes, `grounding` (when on), `sources`
({documents}), `done` ({status, message, timings, usage, cached, cache_age, abstained,
confidence, grounding}); `error` (the error envelope) if it fails midway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, Field

from service.api.grounding import GroundingOut
from service.api.protocols.answer import AnswerFields, ConfidenceOut, UsageOut
from service.api.protocols.driver import Step
from service.api.protocols.envelopes import error_body
from service.api.sources import SourceOut
from service.api.sse import sse_event
from service.errors import ServiceError
from service.rag.reply import Answer


class RagContent(BaseModel):
    """The answer and its sources."""

    message: str
    documents: list[SourceOut]


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
        fields = AnswerFields.of(answer)
        return cls(
            content=RagContent(message=fields.message, documents=fields.sources),
            timings=fields.timings,
            usage=fields.usage,
            grounding=fields.grounding,
            cached=fields.cached,
            cache_age=fields.cache_age,
            abstained=fields.abstained,
            confidence=fields.confidence,
        )


class RagEvents:
    """/ai/rag's Server-Sent Events for the stream driver (the module's docstring)."""

    def __init__(self, feature: str, language: str | None) -> None:
        self.feature = feature  # the error label's prefix (rag)
        self.language = language

    def started(self) -> Iterator[str]:
        return iter(())

    def progress(self, step: Step) -> Iterator[str]:
        return iter(())

    def delta(self, text: str) -> Iterator[str]:
        yield sse_event({"text": text}, "token")

    def final(self, answer: Answer) -> Iterator[str]:
        response = RagResponse.of(answer)
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
                "grounding": response.grounding and response.grounding.model_dump(),
            },
            "done",
        )

    def ended(self) -> Iterator[str]:
        return iter(())

    def failed(self, error: ServiceError) -> Iterator[str]:
        yield sse_event(error_body(self.feature, error, self.language), "error")

    def idle(self) -> Iterator[str]:
        return iter(())  # its steps show the work, and a reader taking each block for an
        # event (the widget's) would stumble on a comment
