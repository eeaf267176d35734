"""Grade: chunks graded by the LLM for relevance (rag.grading.*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    PromptLibrary,
    number_chunks,
)
from service.chains.grade import RelevanceGrader
from service.errors import (
    NoDocumentFound,
)
from service.llm import ChatClient
from service.llm.size import RequestSize
from service.rag.stages.state import Chunks, RagState


@dataclass
class Grade:
    """The LLM grades each chunk against the question; those below `minimum` are left out."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    minimum: str
    concurrency: int
    name: ClassVar[str] = "grade"
    calls_llm: ClassVar[bool] = True

    def wanted(self, state: RagState) -> bool:
        return bool(state.chunks)

    async def run(self, state: RagState) -> Chunks:
        count = len(state.chunks)
        graded = await RelevanceGrader(
            self.llm,
            self.prompts,
            self.size,
            self.minimum,
            concurrency=self.concurrency,
            max_requests=self.llm.calls.spare,
        ).run(state.question.text, state.chunks)
        kept = number_chunks([item.chunk for item in graded.kept])
        if not kept and not state.query.options.answer_without_sources:
            raise NoDocumentFound(
                f"relevance grading found no chunk at {self.minimum} or above among {count}"
            )
        return Chunks(kept, tuple(graded.usages))  # counted even when grading keeps nothing
