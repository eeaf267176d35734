"""Refine: an answer from the first pack, then one request per further pack to improve it.

The requests are strictly sequential: each carries the answer so far. Packs after the first
keep room for that answer (`answer_reserve` characters, from llm.maxTokens); an answer that
still comes back longer is cut to the reserve, so no request exceeds the request size.
"""

from __future__ import annotations

import logging

from service.chains.packing import Packer
from service.chains.prompts import PromptBuilder
from service.chains.result import (
    ChainResult,
    NumberedChunk,
    Prepared,
    clean_answer,
    sources_of,
)
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size
from service.llm.types import ChatMessage

log = logging.getLogger(__name__)


class RefineChain:
    """>>> result = await RefineChain(llm, builder, size=40000, answer_reserve=800).run(chunks)"""

    def __init__(
        self,
        llm: ChatClient,
        builder: PromptBuilder,
        size: int | RequestSize,
        *,
        answer_reserve: int,
    ) -> None:
        self._llm = llm
        self._builder = builder
        self._size = as_size(size)
        self._packer = Packer(builder, self._size)
        self._reserve = answer_reserve

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await (await self.prepare(numbered)).complete(self._llm)

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        """Every request but the last; the last (the final answer) is left to send."""
        first_room = self._packer.room("refine_initial")
        step_room = self._packer.room("refine_step", reserve=self._reserve, previous_answer="")
        packs = self._packer.pack(numbered, step_room, first=first_room)
        packs = Packer.within_calls(packs, self._llm.calls.left, "refine")  # one call a pack
        result = ChainResult(
            "",
            sources_of([item for pack in packs for item in pack.items]),
            citing_steps=len(packs) > 1,
        )

        request = self._builder.messages("refine_initial", sources=packs[0].sources)
        for pack in packs[1:]:
            previous = await self._ask(request, result)
            if self._size.of(previous) > self._reserve:
                cut = self._size.cut(previous, self._reserve)
                log.warning("refine: answer so far cut from %d to %d", len(previous), len(cut))
                previous = cut
            request = self._builder.messages(
                "refine_step", sources=pack.sources, previous_answer=previous
            )
        return Prepared(result, final=request, scaffolding=self._builder.scaffolding)

    async def _ask(self, messages: list[ChatMessage], result: ChainResult) -> str:
        completion = await self._llm.complete(messages)
        result.add_usage(completion.usage)
        return clean_answer(completion.text, self._builder.scaffolding)
