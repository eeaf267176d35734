"""Map-reduce: one request per pack, concurrently; then the partial answers are merged.

Map requests run at the same time (at most `concurrency` at once). Partial answers that say
their documents hold nothing relevant are dropped. When the partial answers do not fit in one
reduce request, they are reduced in levels (a tree) until one answer remains.

The maps and every reduce level are planned within the request's LLM call budget before the
first call: partial answers are cut to `answer_reserve` characters, so how many fit in one
reduce request, and so how many reduce calls there will be, is known in advance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from service.chains.packing import Packer, pack_greedy
from service.chains.prompts import PromptBuilder
from service.chains.result import (
    NO_ANSWER,
    ChainResult,
    NumberedChunk,
    Prepared,
    says_nothing_relevant,
    sources_of,
)
from service.errors import NoValidAnswer, TooManyCalls
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size
from service.llm.types import ChatMessage, Completion

log = logging.getLogger(__name__)

WIDEST_PART = 999_999


class MapReduceChain:
    """>>> result = await MapReduceChain(llm, builder, size=40000, concurrency=4).run(chunks)"""

    def __init__(
        self,
        llm: ChatClient,
        builder: PromptBuilder,
        size: int | RequestSize,
        *,
        concurrency: int = 4,
        map_template: str = "map",
        reduce_template: str = "reduce",
        drop_irrelevant: bool = True,
        answer_reserve: int = 800,
        partial_ok: bool = True,
        citing: bool = True,
    ) -> None:
        """`partial_ok`: when the call budget cannot cover every pack, leave the least
        relevant out (RAG) rather than refuse with TooManyCalls (summaries, which would
        silently miss part of the document). `citing`: the answer cites its sources by number
        (a question's; a summary's does not), and keeps them whatever the last reduce wrote."""
        self._llm = llm
        self._builder = builder
        self._size = as_size(size)
        self._packer = Packer(builder, self._size)
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._map_template = map_template
        self._reduce_template = reduce_template
        self._drop_irrelevant = drop_irrelevant
        self._reserve = answer_reserve
        self._partial_ok = partial_ok
        self._citing = citing

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await (await self.prepare(numbered)).complete(self._llm)

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        """The maps and every reduce level but the last; the last reduce is left to send."""
        # sized with the widest part number a request can show, so no map request outgrows it
        room = self._packer.room(self._map_template, no_answer=NO_ANSWER, part=WIDEST_PART)
        packs = self._packer.pack(numbered, room)
        maps = self._maps_within(len(packs), self._llm.calls.left)
        if maps < len(packs) and not self._partial_ok:
            raise TooManyCalls(
                f"{len(packs)} map requests and their reduce steps are needed, more than the "
                f"{self._llm.calls.left} LLM calls llm.max.calls.per.request leaves: raise it, "
                "or raise prompt.max.request.size so that fewer requests are needed"
            )
        packs = Packer.within_calls(packs, maps, "map-reduce")
        result = ChainResult(
            "",
            sources_of([item for pack in packs for item in pack.items]),
            citing_steps=self._citing and len(packs) > 1,
        )
        partials = await self._all(
            [
                self._builder.messages(
                    self._map_template, sources=pack.sources, no_answer=NO_ANSWER, part=number
                )
                for number, pack in enumerate(packs, start=1)
            ],
            result,
        )
        answers = [self._size.cut(text.strip(), self._reserve) for text in partials]
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
                return Prepared(result, final=requests[0], scaffolding=self._builder.scaffolding)
            answers = await self._all(requests, result)
        return Prepared(result, answer=answers[0], scaffolding=self._builder.scaffolding)

    def _maps_within(self, packs: int, calls: int) -> int:
        """The most map requests that, with every reduce level they lead to, take at most
        `calls` calls."""
        room = self._packer.room(self._reduce_template, answers="")
        widest = self._reserve + self._size.of(PromptBuilder.answer_block(""))
        per_reduce = max(2, room // widest)  # fewer: answers are merged in pairs, cut to fit

        def calls_for(maps: int) -> int:
            total = level = maps
            while level > 1:
                level = -(-level // per_reduce)
                total += level
            return total

        maps = packs
        while maps > 0 and calls_for(maps) > calls:
            maps -= 1
        return maps

    def _reduce_groups(self, answers: list[str]) -> list[list[str]]:
        """Groups of answer blocks that each fit one reduce request (one level of the tree)."""
        room = self._packer.room(self._reduce_template, answers="")
        blocks = [self._fit(PromptBuilder.answer_block(text), room) for text in answers]
        sizes = [self._size.of(block) for block in blocks]
        groups = [[blocks[i] for i in group] for group in pack_greedy(sizes, room)]
        if len(groups) >= len(blocks):
            # every answer needs a request of its own: merge pairs, cut to fit, to progress
            groups = [blocks[i : i + 2] for i in range(0, len(blocks), 2)]
            groups = [[self._fit("".join(g), room)] for g in groups]
        return groups

    def _fit(self, block: str, room: int) -> str:
        if self._size.of(block) <= room:
            return block
        cut = self._size.cut(block, room - 1) + "\n"
        log.warning("a partial answer of %d characters was cut to %d", len(block), len(cut))
        return cut

    async def _all(self, requests: Sequence[list[ChatMessage]], result: ChainResult) -> list[str]:
        completions = await asyncio.gather(*(self._one(messages) for messages in requests))
        for completion in completions:
            result.add_usage(completion.usage)
        return [completion.text for completion in completions]

    async def _one(self, messages: list[ChatMessage]) -> Completion:
        async with self._slots:
            return await self._llm.complete(messages)
