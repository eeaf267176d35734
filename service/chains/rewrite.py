"""Query rewriting: the LLM turns the conversation and the new question into a search query.

Datafari's semantics: the rewritten query is used only to search; the user's question is the
one answered. An answer of `0`, an empty answer, or any failure keeps the original query.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from service.chains.prompts import PromptLibrary
from service.errors import ServiceError
from service.llm.client import ChatClient
from service.llm.types import ChatMessage, Usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rewrite:
    """The search query to use (None: keep the original) and what asking for it cost."""

    query: str | None
    usage: Usage | None = None


class QueryRewriter:
    """>>> search_query = await QueryRewriter(llm, prompts).run(question, history)"""

    def __init__(self, llm: ChatClient, prompts: PromptLibrary) -> None:
        self._llm = llm
        self._prompts = prompts

    async def run(self, question: str, history: tuple[ChatMessage, ...]) -> Rewrite:
        prompt = self._prompts.render(
            "rewrite",
            question=question,
            history=[message.as_dict() for message in history],
            language="",
        )
        try:
            completion = await self._llm.complete([ChatMessage("user", prompt)])
        except ServiceError as error:
            log.warning("query rewriting failed, searching with the question: %s", error.reason)
            return Rewrite(None)
        rewritten = completion.text.strip().strip('"').strip()
        if not rewritten or rewritten == "0":
            log.info("query rewriting returned %r: searching with the question", rewritten)
            return Rewrite(None, completion.usage)
        log.info("search query rewritten to %r", rewritten)
        return Rewrite(rewritten, completion.usage)
