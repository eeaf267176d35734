"""Ground: each sentence of the answer checked against the sources it was written from, once
its text is known (grounding.enabled): unsupported ones marked, dropped, or the answer refused.
An answer written in several steps (refine, map-reduce) whose last step dropped every citation
gets back the numbers of the sources that support its sentences, by the same check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.grounding import Grounding, GroundingPolicy
from service.rag.reply import Amendment, Finishing, source_texts
from service.text.citations import cited_numbers

MAX_RESTORED = 3  # citations given back to one answer: the sources that support most of it


@dataclass
class Ground:
    """The grounding check of a new answer (a repeated one keeps the report it was kept
    with); it may change the message (grounding.action drop, or citations restored), whose
    citations then mark the sources cited, or refuse the answer (NoValidAnswer)."""

    policy: GroundingPolicy
    name: ClassVar[str] = "grounding"
    timed: ClassVar[bool] = True

    def wanted(self, done: Finishing) -> bool:
        return True

    async def run(self, done: Finishing) -> Amendment:
        grounded = await self.policy.run(
            done.answer.message, source_texts(done.result), found_nothing=done.found_nothing
        )
        message = grounded.message
        if done.result.stepped and done.plain and not done.found_nothing:
            message = with_citations_restored(message, grounded.grounding)
        return Amendment(message, grounded.grounding, tuple(grounded.usages))


def with_citations_restored(message: str, grounding: Grounding) -> str:
    """`message` as it is when it cites a source; else followed by the numbers of the sources
    that support its sentences (those supporting most sentences first, at most MAX_RESTORED,
    then in their order): appended, so that a streamed answer's text stays what was shown,
    followed by more."""
    if cited_numbers(message):
        return message
    counts: dict[int, int] = {}
    for sentence in grounding.sentences:
        if sentence.supported:
            for number in sentence.sources:
                counts[number] = counts.get(number, 0) + 1
    if not counts:
        return message
    best = sorted(sorted(counts, key=lambda n: -counts[n])[:MAX_RESTORED])
    separator = "" if not message or message[-1].isspace() else " "
    return message + separator + "".join(f"[{number}]" for number in best)
