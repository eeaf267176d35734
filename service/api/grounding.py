"""The grounding report as the API shows it (/ai/rag, and /v1's `grounding` extension)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SentenceOut(BaseModel):
    """One sentence of the answer, checked against its sources."""

    text: str
    supported: bool
    sources: list[int] = Field(description="The sources (their numbers, [n]) that support it.")
    start: int = Field(
        description="Where the sentence (its citations included) begins in the answer as the LLM "
        "wrote it: the streamed text, and `message` unless grounding.action=drop changed it."
    )
    end: int = Field(description="Where it ends (exclusive), in the same text.")


class GroundingOut(BaseModel):
    """Whether each sentence of the answer is supported by its sources (grounding.enabled)."""

    supported: int
    total: int = Field(description="Sentences checked (those stating nothing are not counted).")
    method: str = Field(
        description="How they were checked: words, embeddings, llm (llm+embeddings: some by the "
        "default check, when the LLM could not judge them)."
    )
    sentences: list[SentenceOut] = Field(
        description="Under grounding.action=drop, the unsupported ones are no longer in the answer."
    )
