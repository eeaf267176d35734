"""Ground: each sentence of the answer checked against the sources it was written from, once
its text is known (grounding.enabled): unsupported ones marked, dropped, or the answer refused;
an answer none of whose sentences is supported is the not-found sentence (abstained).
(An answer written in several steps already has its citations back: the chain restored them,
by this check's words: service.chains.result.with_citations_restored.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from service.chains.result import source_texts
from service.grounding import GroundingPolicy
from service.rag.gate import Reread
from service.rag.reply import Amendment, Finishing
from service.text.support import (
    MAX_CLAUSES,
    Evidence,
    best_source,
    checkable_claims,
    evidence_of,
    within_checked,
)


@dataclass
class Ground:
    """The grounding check of a new answer (a repeated one keeps the report it was kept
    with); it may change the message (grounding.action drop), whose citations then mark the
    sources cited, make it the not-found sentence (none supported: the report of the answer
    the LLM wrote stays, saying why), or refuse the answer (NoValidAnswer)."""

    policy: GroundingPolicy
    # the not-found sentence, in the question's language (None: the answer is never replaced:
    # a caller's JSON, an answer not judged)
    not_found: str | None
    name: ClassVar[str] = "grounding"
    timed: ClassVar[bool] = True

    def wanted(self, done: Finishing) -> bool:
        return True

    async def run(self, done: Finishing) -> Amendment:
        grounded = await self.policy.run(
            done.answer.message, source_texts(done.result.sources), found_nothing=done.found_nothing
        )
        usages = tuple(grounded.usages)
        if grounded.abstained is not None and self.not_found is not None:
            return Amendment(
                self.not_found, grounded.grounding, usages, abstained=grounded.abstained
            )
        return Amendment(grounded.message, grounded.grounding, usages)


class GroundHold(Reread):
    """Holds a streamed answer (service.rag.gate) until one of its finished sentences is
    supported by its sources' words (service.text.support), among the MAX_CLAUSES clauses the
    check reads: an answer none of whose sentences is supported becomes the not-found sentence
    once checked, so none of it is shown first; once one is, the answer stands (meaning only
    adds support). Read again as a Reread is."""

    def __init__(self, sources: Sequence[tuple[int, str]], min_overlap: float) -> None:
        self._sources = sources
        self._min_overlap = min_overlap
        # the sources' evidence, read once at the first reading: per-source memory
        # (support._source_evidence's cache) is shared and may not hold every snippet
        self._evidence: list[Evidence] | None = None
        self._checked = 0  # the finished sentences found unsupported so far (each read once)
        self._clauses = 0  # their clauses: past MAX_CLAUSES, the check vouches for nothing

    def reads_held(self, kept: str) -> bool:
        finished = checkable_claims(kept)[:-1]  # the last one may still be being written
        if len(finished) <= self._checked or self._clauses >= MAX_CLAUSES:
            return True
        if self._evidence is None:
            self._evidence = evidence_of(self._sources)
        evidence, fresh = self._evidence, finished[self._checked :]
        new = within_checked(fresh, self._clauses)  # those the check will read
        self._checked = len(finished)
        self._clauses += sum(len(claim.clauses) for claim in fresh)
        return all(best_source(c, evidence, self._min_overlap) is None for c in new)
