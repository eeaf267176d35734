"""CacheLookup: a question meaning the same as an earlier one answered from the answer cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from service.cache import AnswerCache
from service.llm import ChatClient
from service.rag.reply import Reply
from service.rag.request import RagQuery
from service.rag.stages.keep_answer import repeated
from service.rag.stages.state import CacheMiss, EveryRequest, RagState


@dataclass
class CacheLookup(EveryRequest):
    """The answer cache: a question that means the same as one answered before, asked with
    the same `variant`, is answered again without any LLM call."""

    cache: AnswerCache
    variant: Callable[[RagQuery], str]
    llm: ChatClient
    name: ClassVar[str] = "cache"

    def wanted(self, state: RagState) -> bool:
        return not state.question.history

    async def run(self, state: RagState) -> Reply | CacheMiss:
        found = await self.cache.lookup(state.question.text, self.variant(state.query))
        if found.hit is not None:
            return repeated(
                found.hit, self.llm, state.timings, state.started, state.query.options.form
            )
        return CacheMiss(found.key)
