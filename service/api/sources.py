"""A source of an answer, as every API shows it: /ai/rag's `documents`, /ai/summarize's,
/v1's `sources` (and the SSE `sources` event)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from service.rag.reply import Answer


class SourceOut(BaseModel):
    """A document whose text the LLM was given, in citation order ([1], [2]...)."""

    id: str
    title: str
    url: str
    content: str = Field(description="The text of this document that the LLM was given.")
    cited: bool = Field(description="Whether the answer cites this document ([n], n = rank).")


def sources_of(answer: Answer, *, with_content: bool = True) -> list[SourceOut]:
    """The answer's sources (`with_content=False`: without their text, for a summary)."""
    return [
        SourceOut(
            id=d.id,
            title=d.title,
            url=d.url,
            content=d.content if with_content else "",
            cited=d.cited,
        )
        for d in answer.documents
    ]


def summary_sources(answer: Answer) -> list[SourceOut]:
    """A summary's source: its document, without the text (posted text has none)."""
    return [source for source in sources_of(answer, with_content=False) if source.id]
