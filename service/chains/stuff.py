"""The stuff chain: one LLM request with the chunks that fit, most relevant first."""

from __future__ import annotations

from dataclasses import dataclass

from service.chains.packing import Pack, Packer, Piece
from service.chains.prompts import PromptBuilder
from service.chains.result import ChainResult, NumberedChunk, Prepared, sources_of
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size


class StuffChain:
    """Sends one request: every chunk when all fit, else the most relevant that do, in
    relevance order, passing over those too large for the room left.

    >>> result = await StuffChain(llm, builder, size=40000).run(numbered_chunks)
    >>> result.answer, result.sources
    """

    template = "stuff"

    def __init__(self, llm: ChatClient, builder: PromptBuilder, size: int | RequestSize) -> None:
        self._llm = llm
        self._builder = builder
        self._packer = Packer(builder, as_size(size))
        self._packed: _Packed | None = None

    def fits_in_one_request(self, numbered: list[NumberedChunk]) -> bool:
        return len(self._packs(numbered).packs) == 1

    async def run(self, numbered: list[NumberedChunk]) -> ChainResult:
        return await (await self.prepare(numbered)).complete(self._llm)

    async def prepare(self, numbered: list[NumberedChunk]) -> Prepared:
        packed = self._packs(numbered)
        if len(packed.packs) == 1:
            chosen = packed.packs[0]
        else:
            chosen = Packer.choose(packed.fitted, packed.room)
        return Prepared(
            ChainResult("", sources_of(list(chosen.items))),
            final=self._builder.messages(self.template, sources=chosen.sources),
            verification=self._builder.messages("verify", sources=chosen.sources),
            scaffolding=self._builder.scaffolding,
        )

    def _packs(self, numbered: list[NumberedChunk]) -> _Packed:
        """Fitted and packed once per list: asking whether it fits, then sending it (or the
        selection), renders and measures every chunk once."""
        if self._packed is None or self._packed.numbered is not numbered:
            room = self._packer.room(self.template)
            fitted = self._packer.fit(numbered, room)
            self._packed = _Packed(numbered, fitted, room, Packer.group(fitted, room))
        return self._packed


@dataclass(frozen=True)
class _Packed:
    """A list of chunks as StuffChain measured it: each chunk's pieces, the room, the packs."""

    numbered: list[NumberedChunk]
    fitted: list[list[Piece]]
    room: int
    packs: list[Pack]
