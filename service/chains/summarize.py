"""Summarization: one request when the document fits, map-reduce over its parts when not."""

from __future__ import annotations

from service.chains.mapreduce import MapReduceChain
from service.chains.packing import Packer
from service.chains.prompts import PromptBuilder
from service.chains.result import ChainResult, NumberedChunk, Prepared, sources_of
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size


class Summarizer:
    """>>> result = await Summarizer(llm, builder, size=40000, concurrency=4).run(chunks)

    `builder` should be built with `system_template="summarize_system"`.
    """

    def __init__(
        self,
        llm: ChatClient,
        builder: PromptBuilder,
        size: int | RequestSize,
        *,
        concurrency: int = 4,
        answer_reserve: int = 800,
    ) -> None:
        self._llm = llm
        self._builder = builder
        self._size = as_size(size)
        self._packer = Packer(builder, self._size)
        self._concurrency = concurrency
        self._reserve = answer_reserve

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await (await self.prepare(numbered)).complete(self._llm)

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        packs = self._packer.pack(numbered, self._packer.room("summarize", part=""))
        if len(packs) > 1:
            return await MapReduceChain(
                self._llm,
                self._builder,
                self._size,
                concurrency=self._concurrency,
                map_template="summarize",
                reduce_template="summarize_reduce",
                drop_irrelevant=False,
                answer_reserve=self._reserve,
                partial_ok=False,
                citing=False,
            ).prepare(numbered)
        return Prepared(
            ChainResult("", sources_of(list(packs[0].items))),
            final=self._builder.messages("summarize", sources=packs[0].sources, part=""),
            scaffolding=self._builder.scaffolding,
        )
