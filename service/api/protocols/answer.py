"""The answer's fields as every protocol shows them, built once from an Answer: its sources,
what it cost, its grounding, whether it came from the cache, why it abstained, and what the
LLM's token probabilities say of it. Each renderer carries what its format has room for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from service.api.grounding import GroundingOut
from service.api.sources import SourceOut, sources_of, summary_sources
from service.rag.reply import Answer


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


@dataclass(frozen=True)
class AnswerFields:
    """One answer as the protocols show it (`summary`: its sources without their text)."""

    message: str
    sources: list[SourceOut]
    timings: dict[str, float]
    usage: UsageOut
    grounding: GroundingOut | None
    cache_age: float | None  # seconds, for an answer from the answer cache
    abstained: str | None
    confidence: ConfidenceOut | None
    finish_reason: str

    @classmethod
    def of(cls, answer: Answer, *, summary: bool = False) -> AnswerFields:
        return cls(
            message=answer.message,
            sources=summary_sources(answer) if summary else sources_of(answer),
            timings=answer.timings,
            usage=UsageOut.of(answer),
            grounding=GroundingOut.model_validate(answer.grounding.to_json())
            if answer.grounding
            else None,
            cache_age=answer.cache_age,
            abstained=answer.abstained,
            confidence=ConfidenceOut.model_validate(answer.confidence)
            if answer.confidence
            else None,
            finish_reason=answer.finish_reason,
        )

    @property
    def cached(self) -> bool:
        return self.cache_age is not None

    def honesty(self) -> dict[str, Any]:
        """What a format with room for extra fields carries beside the answer: grounding,
        cached and cache_age, abstained, confidence (each only when it has a value)."""
        shown: dict[str, Any] = {}
        if self.grounding is not None:
            shown["grounding"] = self.grounding.model_dump()
        if self.cached:
            shown["cached"], shown["cache_age"] = True, self.cache_age
        if self.abstained is not None:
            shown["abstained"] = self.abstained
        if self.confidence is not None:
            shown["confidence"] = self.confidence.model_dump()
        return shown
