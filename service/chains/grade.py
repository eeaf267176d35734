"""Relevance grading: the LLM grades each retrieved chunk against the question, and only chunks
at or above `rag.grading.min` reach the answer (seed 002's "grade documents" step).

Chunks are graded in batches that respect the request size, concurrently. Each batch's
answer must be JSON naming every passage of the batch exactly once with LOW, MEDIUM or HIGH
(validated with pydantic). A batch that fails (LLM error, unreadable answer) keeps its chunks
ungraded, logged: grading may narrow an answer, never break it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from service.chains.packing import MIN_ROOM, pack_greedy, too_little_room
from service.chains.prompts import MAX_PROMPT_TITLE, PromptLibrary
from service.chains.result import NumberedChunk
from service.chains.structured import one_each, parse_json_answer
from service.errors import ServiceError
from service.llm.client import ChatClient
from service.llm.size import RequestSize, as_size
from service.llm.types import ChatMessage, Usage
from service.text.clean import clean_context

log = logging.getLogger(__name__)

Level = Literal["LOW", "MEDIUM", "HIGH"]
RANK: dict[str, int] = {"LOW": 0, "MEDIUM": 1, "HIGH": 2}


class Grade(BaseModel):
    """One passage's relevance, as the LLM graded it."""

    id: int
    relevance: Level


class Grades(BaseModel):
    """The JSON the LLM must answer with: one grade per passage."""

    grades: list[Grade]


def parse_grades(answer: str, expected: Sequence[int]) -> dict[int, str]:
    """passage id -> level; raises ValueError unless every expected id is graded once."""
    grades = parse_json_answer(answer, Grades).grades
    return one_each([(grade.id, grade.relevance) for grade in grades], expected, "graded passages")


@dataclass
class Graded:
    """The chunks kept, in their order, and what grading cost."""

    kept: list[NumberedChunk]
    usages: list[Usage] = field(default_factory=list)
    batches: int = 0
    failed_batches: int = 0
    dropped: int = 0


class RelevanceGrader:
    """>>> graded = await RelevanceGrader(llm, prompts, size, "HIGH").run(question, chunks)"""

    def __init__(
        self,
        llm: ChatClient,
        prompts: PromptLibrary,
        size: int | RequestSize,
        minimum: Level,
        *,
        concurrency: int = 4,
        max_requests: int | None = None,
    ) -> None:
        """`max_requests`: grading requests allowed (the request's call budget, less the
        answer's); chunks beyond the batches it allows, the least relevant, are left out."""
        self._llm = llm
        self._max_requests = max_requests
        self._prompts = prompts
        self._size = as_size(size)
        self._minimum = RANK[minimum]
        self._slots = asyncio.Semaphore(concurrency)

    def batches(self, question: str, chunks: Sequence[NumberedChunk]) -> list[list[int]]:
        """Indices of `chunks` per request, each request within the request size."""
        size = self._size
        room = size.limit - size.of_messages([ChatMessage("user", self._render(question, ""))])
        if room < MIN_ROOM:
            raise too_little_room(room, size, "the grading instructions and question")
        sizes = [size.of(_block(index + 1, item)) for index, item in enumerate(chunks)]
        return pack_greedy(sizes, room)

    async def run(self, question: str, chunks: Sequence[NumberedChunk]) -> Graded:
        groups = self.batches(question, chunks)
        if self._max_requests is not None and len(groups) > self._max_requests:
            log.warning(
                "grading would take %d requests, %d are allowed: the chunks of the last %d "
                "batches are left out (llm.max.calls.per.request)",
                len(groups),
                self._max_requests,
                len(groups) - self._max_requests,
            )
            groups = groups[: self._max_requests]
        results = await asyncio.gather(
            *(
                self._grade(question, [(index, chunks[index]) for index in group])
                for group in groups
            )
        )
        graded = Graded(kept=[], batches=len(groups))
        keep: set[int] = set()
        for kept_indices, usage, failed in results:
            keep.update(kept_indices)
            if usage is not None:
                graded.usages.append(usage)
            graded.failed_batches += failed
        graded.kept = [item for index, item in enumerate(chunks) if index in keep]
        graded.dropped = len(chunks) - len(graded.kept)
        log.info(
            "graded %d chunks in %d requests (%d failed): %d kept at %s or above",
            len(chunks),
            graded.batches,
            graded.failed_batches,
            len(graded.kept),
            next(level for level, rank in RANK.items() if rank == self._minimum),
        )
        return graded

    async def _grade(
        self, question: str, batch: list[tuple[int, NumberedChunk]]
    ) -> tuple[list[int], Usage | None, bool]:
        """(indices kept, usage, failed) for one request; a failure keeps the whole batch."""
        passages = "".join(_block(index + 1, item) for index, item in batch)
        everything = [index for index, _ in batch]
        async with self._slots:
            try:
                completion = await self._llm.complete(
                    [ChatMessage("user", self._render(question, passages))]
                )
            except ServiceError as error:
                log.warning("grading failed, keeping %d chunks ungraded: %s", len(batch), error)
                return everything, None, True
        try:
            levels = parse_grades(completion.text, [index + 1 for index in everything])
        except ValueError as error:
            log.warning(
                "grading answer unusable (%s), keeping %d chunks ungraded", error, len(batch)
            )
            return everything, completion.usage, True
        kept = [index for index in everything if RANK[levels[index + 1]] >= self._minimum]
        return kept, completion.usage, False

    def _render(self, question: str, passages: str) -> str:
        return self._prompts.render("grade", question=question, passages=passages)


def _block(passage_id: int, item: NumberedChunk) -> str:
    """One passage, fenced, its text cleaned like every document text sent to the LLM."""
    title = clean_context(item.chunk.document.title[:MAX_PROMPT_TITLE])
    text = clean_context(item.chunk.text)
    return f'<passage id="{passage_id}">\n{title}\n{text}\n</passage>\n'
