"""Packing numbered chunks into the fewest requests that fit the size budget; the only
packing there is (greedy, in relevance order)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.prompts import PromptBuilder
from service.chains.result import Chunk, NumberedChunk
from service.errors import PromptTooLong, TechnicalError, TooManyCalls
from service.text.chunk import Chunker

# -- packs of chunks, each within a request's room -------------------------------------------------

log = logging.getLogger(__name__)

# Characters a request must keep for sources. Below it, what the caller sent (history, a
# system message, the question) leaves no useful room: the request is refused rather than
# split into ever smaller packs, each one more LLM call.
MIN_ROOM = 500


def too_little_room(room: int, budget: int, what: str) -> PromptTooLong:
    return PromptTooLong(
        f"a request of at most {budget} characters (prompt.max.request.size, or the model's "
        f"context) leaves {max(room, 0)} for sources once {what} are in; at least {MIN_ROOM} "
        "are needed: shorten the history, the system message or the question"
    )


def too_small_a_budget(room: int, budget: int, template: str) -> TechnicalError:
    """Not the caller's doing: the configured budget is too small for the instructions."""
    return TechnicalError(
        f"prompt.max.request.size ({budget}) leaves {max(room, 0)} characters for sources in "
        f"a {template} request before any history or question; at least {MIN_ROOM} are "
        "needed: raise it (or lower llm.maxTokens, which refine keeps room for)"
    )


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
        """Characters left for source blocks in a request of `template`; PromptTooLong (a
        400) when that is under MIN_ROOM."""
        room = self._budget - reserve - self._builder.size(template, sources="", **variables)
        if room < MIN_ROOM:
            question = self._builder.question
            history = sum(len(message.content) for message in question.history)
            if room + history + len(question.text) < MIN_ROOM:
                raise too_small_a_budget(room, self._budget, template)
            raise too_little_room(
                room,
                self._budget,
                f"the {template} instructions, the history ({history} characters) and the "
                f"question ({len(question.text)} characters)",
            )
        return room

    @staticmethod
    def within_calls(packs: list[Pack], calls: int, chain: str) -> list[Pack]:
        """The first `calls` packs (the most relevant sources): a request never makes more
        LLM calls than its budget allows, whatever the sources' size."""
        if calls < 1:
            raise TooManyCalls(f"no LLM call is left for the {chain} chain's answer")
        if len(packs) > calls:
            log.warning(
                "%s: %d requests would be needed, %d calls are left: the %d least relevant "
                "packs of sources are left out (llm.max.calls.per.request)",
                chain,
                len(packs),
                calls,
                len(packs) - calls,
            )
        return packs[:calls]

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
        """The chunk as one block, or split into pieces whose blocks fit `room`. The pieces
        are as large as the room allows: first the room left beside the block's head (number,
        title), then half of it, which always fits since cleaning at most doubles a text."""
        block = self._builder.block(item)
        if len(block) <= room:
            return [(item, block)]
        head = len(self._builder.block(NumberedChunk(item.number, Chunk(item.chunk.document, ""))))
        space = room - head  # most of the room: titles are capped in the block (PromptBuilder)
        for target in (space, space // 2):
            pieces = [
                NumberedChunk(item.number, Chunk(item.chunk.document, piece))
                for piece in Chunker(target).run(item.chunk.text)
            ]
            blocks = [self._builder.block(piece) for piece in pieces]
            if all(len(b) <= room for b in blocks):
                break
        return list(zip(pieces, blocks, strict=True))


# -- greedy packing of sized items -----------------------------------------------------------------


def pack_greedy(sizes: Sequence[int], budget: int, *, first: int | None = None) -> list[list[int]]:
    """Indices of `sizes` grouped in order; each group sums to at most `budget` (the first
    group to at most `first`, when the first request has other room than the rest).

    Every group holds at least one item, so an item larger than the budget gets a group of its
    own (the caller splits or truncates it). For items kept in order, filling each group as far
    as it goes gives the fewest groups possible.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index, size in enumerate(sizes):
        limit = first if first is not None and not groups else budget
        if current and used + size > limit:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        groups.append(current)
    return groups
