"""Ground: each sentence of the answer checked against the sources it was written from, once
its text is known (grounding.enabled): unsupported ones marked, dropped, or the answer refused.
(An answer written in several steps already has its citations back: the chain restored them,
by this check's words: service.chains.result.with_citations_restored.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from service.chains.result import source_texts
from service.grounding import GroundingPolicy
from service.rag.reply import Amendment, Finishing


@dataclass
class Ground:
    """The grounding check of a new answer (a repeated one keeps the report it was kept
    with); it may change the message (grounding.action drop), whose citations then mark the
    sources cited, or refuse the answer (NoValidAnswer)."""

    policy: GroundingPolicy
    name: ClassVar[str] = "grounding"
    timed: ClassVar[bool] = True

    def wanted(self, done: Finishing) -> bool:
        return True

    async def run(self, done: Finishing) -> Amendment:
        grounded = await self.policy.run(
            done.answer.message, source_texts(done.result.sources), found_nothing=done.found_nothing
        )
        return Amendment(grounded.message, grounded.grounding, tuple(grounded.usages))
