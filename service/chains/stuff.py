"""The stuff chain: one LLM request with the chunks that fit, most relevant first."""

from __future__ import annotations

from service.chains.packing import Pack, Packer
from service.chains.prompts import PromptBuilder
from service.chains.result import ChainResult, NumberedChunk, Prepared, sources_of
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size


class StuffChain:
    """Sends one request: every chunk when all fit, else the most relevant that do, in
    relevance order, passing over those too large for the room left.

    >>> result = await StuffChain(llm, builder, budget=40000).run(numbered_chunks)
    >>> result.answer, result.sources
    """

    template = "stuff"

    def __init__(self, llm: ChatClient, builder: PromptBuilder, budget: int | RequestSize) -> None:
        self._llm = llm
        self._builder = builder
        self._packer = Packer(builder, as_size(budget))
        self._packed: tuple[list[NumberedChunk], list[Pack]] | None = None

    def fits_in_one_request(self, numbered: list[NumberedChunk]) -> bool:
        return len(self._packs(numbered)) == 1

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await (await self.prepare(numbered)).complete(self._llm)

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        packs = self._packs(numbered)
        chosen = packs[0] if len(packs) == 1 else self._packer.select(numbered, self._room())
        return Prepared(
            ChainResult("", sources_of(list(chosen.items))),
            final=self._builder.messages(self.template, sources=chosen.sources),
        )

    def _packs(self, numbered: list[NumberedChunk]) -> list[Pack]:
        """Packed once per list: asking whether it fits, then sending it, renders it once."""
        if self._packed is None or self._packed[0] is not numbered:
            self._packed = (numbered, self._packer.pack(numbered, self._room()))
        return self._packed[1]

    def _room(self) -> int:
        return self._packer.room(self.template)
