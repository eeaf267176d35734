"""Rewrite: the search query rewritten with the chat history (chat.query.rewriting.*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    PromptLibrary,
    QueryRewriter,
)
from service.llm import ChatClient
from service.rag.stages.state import RagState, SearchQuery, WritesQueries
from service.text import sanitize_query


@dataclass
class Rewrite(WritesQueries):
    """The LLM writes the search query from the question and the conversation."""

    llm: ChatClient
    prompts: PromptLibrary
    name: ClassVar[str] = "rewrite"

    async def run(self, state: RagState) -> SearchQuery:
        rewrite = await QueryRewriter(self.llm, self.prompts).run(
            state.question.text, state.question.history
        )
        return SearchQuery(sanitize_query(rewrite.query) or state.search_query, rewrite.usage)
