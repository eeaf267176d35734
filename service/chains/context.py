"""The material a chain works on: chunks of retrieved documents, numbered as sources."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.llm.types import Usage
from service.retrieval.base import RetrievedDocument


@dataclass(frozen=True)
class Chunk:
    """A piece of a retrieved document, small enough to go in a prompt."""

    document: RetrievedDocument
    text: str


@dataclass(frozen=True)
class NumberedChunk:
    """A chunk with the number its document is cited by ([1], [2]...)."""

    number: int
    chunk: Chunk


def number_chunks(chunks: list[Chunk]) -> list[NumberedChunk]:
    """Documents are numbered 1, 2... in the order their first chunk appears."""
    numbers: dict[str, int] = {}
    numbered = []
    for chunk in chunks:
        key = chunk.document.source_id
        numbers.setdefault(key, len(numbers) + 1)
        numbered.append(NumberedChunk(numbers[key], chunk))
    return numbered


@dataclass(frozen=True)
class Source:
    """A document whose content was sent to the LLM, under its citation number."""

    number: int
    document: RetrievedDocument
    snippets: tuple[str, ...]


def sources_of(sent: list[NumberedChunk]) -> list[Source]:
    """The documents behind the chunks that were sent, in citation order."""
    by_number: dict[int, list[NumberedChunk]] = {}
    for item in sent:
        by_number.setdefault(item.number, []).append(item)
    return [
        Source(number, items[0].chunk.document, tuple(item.chunk.text for item in items))
        for number, items in sorted(by_number.items())
    ]


@dataclass
class ChainResult:
    """What a chain produced: the answer, the sources it was given, and what it cost."""

    answer: str
    sources: list[Source]
    llm_calls: int = 0
    usage: Usage = field(default_factory=Usage)

    def add_usage(self, usage: Usage) -> None:
        self.llm_calls += 1
        self.usage = Usage(
            self.usage.prompt_tokens + usage.prompt_tokens,
            self.usage.completion_tokens + usage.completion_tokens,
        )
