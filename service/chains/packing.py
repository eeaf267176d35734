"""Packing numbered chunks into the fewest requests that fit the size budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.builder import PromptBuilder
from service.chains.context import Chunk, NumberedChunk
from service.errors import TechnicalError
from service.text.chunk import Chunker
from service.text.pack import pack_greedy

MIN_ROOM = 200  # characters for sources; below this the instructions leave no useful room


@dataclass(frozen=True)
class Pack:
    """The chunks of one request, with their rendered source blocks."""

    items: tuple[NumberedChunk, ...]
    blocks: tuple[str, ...]

    @property
    def sources(self) -> str:
        return "".join(self.blocks)


class Packer:
    """Greedy, in relevance order: each request takes chunks until the next would not fit.

    A chunk too large for any request is split into pieces that fit (never dropped); every
    piece keeps its document's citation number.
    """

    def __init__(self, builder: PromptBuilder, budget: int) -> None:
        self._builder = builder
        self._budget = budget

    def room(self, template: str, *, reserve: int = 0, **variables: object) -> int:
        """Characters left for source blocks in a request of `template`."""
        room = self._budget - reserve - self._builder.size(template, sources="", **variables)
        if room < MIN_ROOM:
            raise TechnicalError(
                f"prompt.max.request.size ({self._budget}) leaves {room} characters for "
                f"documents once the {template} instructions, history and question are in; "
                "raise it or shorten the history"
            )
        return room

    def pack(
        self, numbered: Sequence[NumberedChunk], room: int, *, first: int | None = None
    ) -> list[Pack]:
        smallest = min(room, first) if first is not None else room
        items = [piece for item in numbered for piece in self._fit(item, smallest)]
        groups = pack_greedy([len(block) for _, block in items], room, first=first)
        return [
            Pack(tuple(items[i][0] for i in group), tuple(items[i][1] for i in group))
            for group in groups
        ]

    def _fit(self, item: NumberedChunk, room: int) -> list[tuple[NumberedChunk, str]]:
        block = self._builder.block(item)
        if len(block) <= room:
            return [(item, block)]
        text = item.chunk.text
        target = max(1, len(text) * room // len(block) - 1)
        while True:
            pieces = [
                NumberedChunk(item.number, Chunk(item.chunk.document, piece))
                for piece in Chunker(target).run(text)
            ]
            blocks = [self._builder.block(piece) for piece in pieces]
            if all(len(b) <= room for b in blocks) or target == 1:
                return list(zip(pieces, blocks, strict=True))
            target = max(1, target * 9 // 10)
