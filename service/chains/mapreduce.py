"""Map-reduce: one request per pack, concurrently; then the partial answers are merged.

Map requests run at the same time (at most `concurrency` at once). Partial answers that say
their documents hold nothing relevant are dropped. When the partial answers do not fit in one
reduce request, they are reduced in levels (a tree) until one answer remains.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from service.chains.answer import NO_ANSWER, says_nothing_relevant
from service.chains.builder import PromptBuilder
from service.chains.context import ChainResult, NumberedChunk, sources_of
from service.chains.packing import Packer
from service.chains.prepared import Prepared, complete
from service.errors import NoValidAnswer
from service.llm.client import ChatClient
from service.llm.types import ChatMessage, Completion
from service.text.pack import pack_greedy

log = logging.getLogger(__name__)

WIDEST_PART = 999_999


class MapReduceChain:
    """>>> result = await MapReduceChain(llm, builder, budget=40000, concurrency=4).run(chunks)"""

    def __init__(
        self,
        llm: ChatClient,
        builder: PromptBuilder,
        budget: int,
        *,
        concurrency: int = 4,
        map_template: str = "map",
        reduce_template: str = "reduce",
        drop_irrelevant: bool = True,
    ) -> None:
        self._llm = llm
        self._builder = builder
        self._packer = Packer(builder, budget)
        self._budget = budget
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._map_template = map_template
        self._reduce_template = reduce_template
        self._drop_irrelevant = drop_irrelevant

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await complete(self._llm, await self.prepare(numbered))

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        """The maps and every reduce level but the last; the last reduce is left to send."""
        # sized with the widest part number a request can show, so no map request outgrows it
        room = self._packer.room(self._map_template, no_answer=NO_ANSWER, part=WIDEST_PART)
        packs = self._packer.pack(numbered, room)
        result = ChainResult("", sources_of([item for pack in packs for item in pack.items]))
        partials = await self._all(
            [
                self._builder.messages(
                    self._map_template, sources=pack.sources, no_answer=NO_ANSWER, part=number
                )
                for number, pack in enumerate(packs, start=1)
            ],
            result,
        )
        answers = [text.strip() for text in partials]
        if self._drop_irrelevant:
            answers = [text for text in answers if not says_nothing_relevant(text)]
            log.info("map-reduce: %d of %d partial answers kept", len(answers), len(partials))
        if not answers:
            raise NoValidAnswer("every map request said its documents hold nothing relevant")
        while len(answers) > 1:
            groups = self._reduce_groups(answers)
            requests = [
                self._builder.messages(self._reduce_template, answers="".join(group))
                for group in groups
            ]
            if len(requests) == 1:
                return Prepared(result, final=requests[0])
            answers = await self._all(requests, result)
        return Prepared(result, answer=answers[0])

    def _reduce_groups(self, answers: list[str]) -> list[list[str]]:
        """Groups of answer blocks that each fit one reduce request (one level of the tree)."""
        room = self._packer.room(self._reduce_template, answers="")
        blocks = [self._fit(PromptBuilder.answer_block(text), room) for text in answers]
        groups = [
            [blocks[i] for i in group] for group in pack_greedy([len(b) for b in blocks], room)
        ]
        if len(groups) >= len(blocks):
            # every answer needs a request of its own: merge pairs, cut to fit, to progress
            groups = [blocks[i : i + 2] for i in range(0, len(blocks), 2)]
            groups = [[self._fit("".join(g), room)] for g in groups]
        return groups

    def _fit(self, block: str, room: int) -> str:
        if len(block) <= room:
            return block
        log.warning("a partial answer of %d characters was cut to %d", len(block), room)
        return block[: room - 1] + "\n"

    async def _all(self, requests: Sequence[list[ChatMessage]], result: ChainResult) -> list[str]:
        completions = await asyncio.gather(*(self._one(messages) for messages in requests))
        for completion in completions:
            result.add_usage(completion.usage)
        return [completion.text for completion in completions]

    async def _one(self, messages: list[ChatMessage]) -> Completion:
        async with self._slots:
            return await self._llm.complete(messages)
