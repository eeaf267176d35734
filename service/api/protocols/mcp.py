"""The MCP server's answers (service.api.mcp): a tool's structured result, the answer whole
with its numbered sources and, when they have a value, its grounding, whether it came from
the cache, why it abstained and what the LLM's token probabilities say of it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.api.protocols.answer import AnswerFields, ConfidenceOut
from service.rag.reply import Answer


class AnswerSource(BaseModel):
    """A document the answer was written from; `number` is its citation mark ([n])."""

    number: int
    id: str
    title: str
    url: str
    cited: bool = Field(description="Whether the answer cites it.")


class AskResult(BaseModel):
    answer: str
    sources: list[AnswerSource]
    grounding: dict[str, Any] | None = Field(
        None, description="Each sentence checked against its sources (grounding.enabled)."
    )
    llm_calls: int
    abstained: str | None = Field(
        None, description="Why the answer says the documents do not hold it; null: it answers."
    )
    confidence: ConfidenceOut | None = Field(
        None, description="What the LLM's token probabilities say of its answer (llm.logprobs)."
    )
    cached: bool = Field(False, description="Whether the answer is one given before.")

    @classmethod
    def of(cls, answer: Answer) -> AskResult:
        fields = AnswerFields.of(answer)
        return cls(
            answer=fields.message,
            sources=[
                AnswerSource(number=d.number, id=d.id, title=d.title, url=d.url, cited=d.cited)
                for d in answer.documents
            ],
            grounding=fields.grounding.model_dump() if fields.grounding else None,
            llm_calls=fields.usage.llm_calls,
            abstained=fields.abstained,
            confidence=fields.confidence,
            cached=fields.cached,
        )


class SummaryResult(BaseModel):
    summary: str
