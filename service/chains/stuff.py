"""The stuff chain: one LLM request holding as many chunks as fit, most relevant first."""

from __future__ import annotations

from service.chains.answer import clean_answer
from service.chains.builder import PromptBuilder
from service.chains.context import ChainResult, Chunk, NumberedChunk, number_chunks, sources_of
from service.llm.client import ChatClient


class StuffChain:
    """Sends the chunks that fit under `budget` characters in a single request.

    Chunks are taken in order until the next one would not fit. The first chunk is always
    sent: cut to what fits if it alone is too large.

    >>> chain = StuffChain(llm, builder, budget=40000)
    >>> result = await chain.run(chunks)   # result.answer, result.sources
    """

    def __init__(self, llm: ChatClient, builder: PromptBuilder, budget: int) -> None:
        self._llm = llm
        self._builder = builder
        self._budget = budget

    async def run(self, chunks: list[Chunk]) -> ChainResult:
        sent, blocks = self.select(number_chunks(chunks))
        completion = await self._llm.complete(self._builder.messages(blocks))
        result = ChainResult(clean_answer(completion.text), sources_of(sent))
        result.add_usage(completion.usage)
        return result

    def select(self, numbered: list[NumberedChunk]) -> tuple[list[NumberedChunk], list[str]]:
        """The longest prefix of `numbered` that fits, and its rendered source blocks."""
        room = self._budget - self._builder.overhead
        sent: list[NumberedChunk] = []
        blocks: list[str] = []
        for item in numbered:
            block = self._builder.block(item)
            if len(block) > room:
                if not sent:
                    item, block = self._cut_to_fit(item, room)
                    sent.append(item)
                    blocks.append(block)
                break
            sent.append(item)
            blocks.append(block)
            room -= len(block)
        return sent, blocks

    def _cut_to_fit(self, item: NumberedChunk, room: int) -> tuple[NumberedChunk, str]:
        """Shorten a chunk until its block fits in `room` (at least one character is kept)."""
        text = item.chunk.text
        block = self._builder.block(item)
        while len(block) > room and len(text) > 1:
            excess = len(block) - room
            text = text[: max(1, len(text) - excess)]
            item = NumberedChunk(item.number, Chunk(item.chunk.document, text))
            block = self._builder.block(item)
        return item, block
