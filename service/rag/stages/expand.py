"""Expand: several search queries for one question (rag.queries.count)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    PromptLibrary,
)
from service.chains.expand import QueryExpander
from service.llm import ChatClient
from service.rag.stages.state import Queries, RagState, WritesQueries
from service.text import sanitize_query


@dataclass
class Expand(WritesQueries):
    """The LLM writes `count` search queries, searched at once and fused (multi-query)."""

    llm: ChatClient
    prompts: PromptLibrary
    count: int
    name: ClassVar[str] = "expand"

    async def run(self, state: RagState) -> Queries:
        question = state.question
        expansion = await QueryExpander(self.llm, self.prompts).run(
            state.search_query, question.text, question.history, count=self.count
        )
        queries = tuple(q for q in map(sanitize_query, expansion.queries) if q)
        return Queries(queries, expansion.usage)
