"""Packing numbered chunks into the fewest requests that fit the request size; the only
packing there is (greedy, in relevance order)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.prompts import PromptBuilder
from service.chains.result import Chunk, NumberedChunk
from service.errors import PromptTooLong, TechnicalError, TooManyCalls
from service.llm.size import RequestSize, as_size
from service.text.chunk import Chunker

# -- packs of chunks, each within a request's room -------------------------------------------------

log = logging.getLogger(__name__)

# Characters a request must keep for sources. Below it, what the caller sent (history, a
# system message, the question) leaves no useful room: the request is refused rather than
# split into ever smaller packs, each one more LLM call.
MIN_ROOM = 500
# Characters below which a chunk too large for a request is not split further
MIN_PIECE = 100


def too_little_room(room: int, size: RequestSize, what: str) -> PromptTooLong:
    return PromptTooLong(
        f"a request of at most {size} leaves {max(room, 0)} characters for sources once "
        f"{what} are in; at least {MIN_ROOM} are needed: shorten the history, the system "
        "message or the question"
    )


def too_small_a_request_size(room: int, size: RequestSize, template: str) -> TechnicalError:
    """Not the caller's doing: the configured request size is too small for the instructions."""
    return TechnicalError(
        f"a request of at most {size} leaves {max(room, 0)} characters for sources in a "
        f"{template} request before any history or question; at least {MIN_ROOM} are "
        "needed: raise it (or lower llm.maxTokens, which refine keeps room for)"
    )


# a chunk (or a piece of it), its rendered source block, and the block's size
Piece = tuple[NumberedChunk, str, int]


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

    def __init__(self, builder: PromptBuilder, size: int | RequestSize) -> None:
        self._builder = builder
        self._size = as_size(size)

    def room(self, template: str, *, reserve: int = 0, **variables: object) -> int:
        """Characters left for source blocks in a request of `template`; PromptTooLong (a
        400) when that is under MIN_ROOM."""
        used = self._builder.size(template, self._size, sources="", **variables)
        room = self._size.limit - reserve - used
        if room < MIN_ROOM:
            question = self._builder.question
            history = sum(len(message.content) for message in question.history)
            if room + history + len(question.text) < MIN_ROOM:
                raise too_small_a_request_size(room, self._size, template)
            raise too_little_room(
                room,
                self._size,
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
        return self.group(self.fit(numbered, smallest), room, first=first)

    def select(self, numbered: Sequence[NumberedChunk], room: int) -> Pack:
        return self.choose(self.fit(numbered, room), room)

    def fit(self, numbered: Sequence[NumberedChunk], room: int) -> list[list[Piece]]:
        """Each chunk as the pieces that fit `room` (one piece when it fits whole), each
        rendered and measured once."""
        return [self._fit(item, room) for item in numbered]

    @staticmethod
    def group(
        fitted: Sequence[Sequence[Piece]], room: int, *, first: int | None = None
    ) -> list[Pack]:
        """Every piece, packed greedily in order."""
        pieces = [piece for chunk in fitted for piece in chunk]
        groups = pack_greedy([size for _, _, size in pieces], room, first=first)
        return [_pack_of([pieces[i] for i in group]) for group in groups]

    @staticmethod
    def choose(fitted: Sequence[Sequence[Piece]], room: int) -> Pack:
        """One request's sources: in relevance order, every chunk that still fits, passing
        over those that do not (KAITO's context selection); of a chunk larger than the whole
        room, its first piece, so the most relevant is never lost."""
        chosen: list[Piece] = []
        left = room
        for item, block, size in (pieces[0] for pieces in fitted):
            if size <= left:
                chosen.append((item, block, size))
                left -= size
        return _pack_of(chosen)

    def _fit(self, item: NumberedChunk, room: int) -> list[Piece]:
        """The chunk as one block, or split into pieces whose blocks fit `room`. The pieces
        are as large as the room allows: first the room left beside the block's head (number,
        title), in this text's characters per unit of size, then half of that, and so on (with
        characters alone, half always fits: cleaning at most doubles a text)."""
        block = self._builder.block(item)
        size = self._size.of(block)
        if size <= room:
            return [(item, block, size)]
        head = self._size.of(
            self._builder.block(NumberedChunk(item.number, Chunk(item.chunk.document, "")))
        )
        # most of the room: titles are capped in the block (PromptBuilder)
        target = (room - head) * len(block) // size
        while True:
            pieces = [
                NumberedChunk(item.number, Chunk(item.chunk.document, piece))
                for piece in Chunker(max(target, MIN_PIECE)).run(item.chunk.text)
            ]
            blocks = [self._builder.block(piece) for piece in pieces]
            sizes = [self._size.of(b) for b in blocks]
            if target <= MIN_PIECE or all(s <= room for s in sizes):
                return list(zip(pieces, blocks, sizes, strict=True))
            target //= 2


def _pack_of(pieces: Sequence[Piece]) -> Pack:
    return Pack(tuple(item for item, _, _ in pieces), tuple(block for _, block, _ in pieces))


# -- greedy packing of sized items -----------------------------------------------------------------


def pack_greedy(sizes: Sequence[int], limit: int, *, first: int | None = None) -> list[list[int]]:
    """Indices of `sizes` grouped in order; each group sums to at most `limit` (the first
    group to at most `first`, when the first request has other room than the rest).

    Every group holds at least one item, so an item larger than the limit gets a group of its
    own (the caller splits or truncates it). For items kept in order, filling each group as far
    as it goes gives the fewest groups possible.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index, size in enumerate(sizes):
        limit_now = first if first is not None and not groups else limit
        if current and used + size > limit_now:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        groups.append(current)
    return groups
