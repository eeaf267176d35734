"""grounding.method=llm: the configured LLM judges each sentence of the answer against the
source sentences closest to it, in batches that fit a request, answering strict JSON.

What the LLM does not judge (no call left in llm.max.calls.per.request, a failed request, an
answer that is not the JSON asked for) is left to the default check, logged: the judge may
make the report better, never make it fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from service.chains.packing import pack_greedy
from service.chains.prompts import PromptLibrary
from service.chains.structured import one_each, parse_json_answer
from service.errors import ServiceError
from service.grounding.check import Grounding, GroundingCheck, SentenceCheck
from service.llm.client import ChatClient
from service.llm.size import RequestSize
from service.llm.types import ChatMessage, Usage
from service.text.claims import Claim
from service.text.clean import clean_context
from service.text.support import Evidence, checkable_claims, closest, evidence_of

log = logging.getLogger(__name__)

MAX_EXCERPT = 600  # characters of one source excerpt shown to the judge


class Verdict(BaseModel):
    id: int
    supported: bool


class Verdicts(BaseModel):
    """The JSON the LLM must answer with: one verdict per statement."""

    verdicts: list[Verdict]


def parse_verdicts(answer: str, expected: Sequence[int]) -> dict[int, bool]:
    """statement id -> supported; raises ValueError unless every expected id is judged once."""
    verdicts = parse_json_answer(answer, Verdicts).verdicts
    labels = [(verdict.id, verdict.supported) for verdict in verdicts]
    return one_each(labels, expected, "judged statements")


@dataclass(frozen=True)
class _Statement:
    index: int  # among the answer's checkable claims
    claim: Claim
    excerpts: tuple[Evidence, ...]

    def block(self, number: int) -> str:
        excerpts = "".join(
            f'<excerpt source="{e.source}">{clean_context(e.text[:MAX_EXCERPT])}</excerpt>\n'
            for e in self.excerpts
        )
        return f'<statement id="{number}">{clean_context(self.claim.text)}</statement>\n{excerpts}'


class LlmGroundingCheck:
    """>>> grounding = await LlmGroundingCheck(llm, prompts, size, fallback).run(answer, sources)

    `usages` holds what each judging request cost, for the answer's usage."""

    def __init__(
        self,
        llm: ChatClient,
        prompts: PromptLibrary,
        size: RequestSize,
        fallback: GroundingCheck,
        *,
        concurrency: int = 4,
    ) -> None:
        self._llm = llm
        self._prompts = prompts
        self._size = size
        self._fallback = fallback
        self._slots = asyncio.Semaphore(concurrency)
        self.usages: list[Usage] = []

    async def run(self, answer: str, sources: Sequence[tuple[int, str]]) -> Grounding:
        claims = checkable_claims(answer)
        evidence = evidence_of(sources)
        statements = [
            _Statement(index, claim, tuple(closest(claim, evidence)))
            for index, claim in enumerate(claims)
        ]
        verdicts: dict[int, bool] = {}
        batches = self._batches([s for s in statements if s.excerpts])
        for judged in await asyncio.gather(*(self._judge(batch) for batch in batches)):
            verdicts.update(judged)
        for statement in statements:  # nothing to read it against: unsupported, no call needed
            if not statement.excerpts:
                verdicts[statement.index] = False
        left = [index for index in range(len(claims)) if index not in verdicts]
        # only the claims the LLM left are checked the default way, on the same evidence
        fallback = await self._fallback.check([claims[i] for i in left], evidence) if left else None
        fallen = dict(zip(left, fallback.sentences, strict=True)) if fallback else {}
        checks = []
        for statement in statements:
            if statement.index in verdicts:
                supported = verdicts[statement.index]
                numbers = sorted({e.source for e in statement.excerpts}) if supported else []
                claim = statement.claim
                checks.append(
                    SentenceCheck(claim.text, supported, tuple(numbers), claim.start, claim.end)
                )
            else:
                checks.append(fallen[statement.index])
        method = "llm" if fallback is None else f"llm+{fallback.method}"
        return Grounding(tuple(checks), method)

    def _batches(self, statements: list[_Statement]) -> list[list[_Statement]]:
        """Statements per request within the size budget and the request's calls left."""
        if not statements:
            return []
        room = self._size.limit - self._size.of_messages([ChatMessage("user", self._render(""))])
        sizes = [self._size.of(s.block(i + 1)) for i, s in enumerate(statements)]
        groups = [[statements[i] for i in group] for group in pack_greedy(sizes, max(room, 1))]
        allowed = self._llm.calls.left
        if len(groups) > allowed:
            log.warning(
                "judging grounding would take %d requests, %d are left "
                "(llm.max.calls.per.request): the default check takes the rest",
                len(groups),
                allowed,
            )
        return groups[: max(allowed, 0)]

    async def _judge(self, batch: list[_Statement]) -> dict[int, bool]:
        """Claim index -> supported, for the statements the LLM judged ({} when it failed)."""
        text = "".join(statement.block(number) for number, statement in enumerate(batch, 1))
        async with self._slots:
            try:
                completion = await self._llm.complete([ChatMessage("user", self._render(text))])
            except ServiceError as error:
                log.warning("judging grounding failed, the default check decides: %s", error)
                return {}
        self.usages.append(completion.usage)
        try:
            verdicts = parse_verdicts(completion.text, range(1, len(batch) + 1))
        except ValueError as error:
            log.warning("grounding verdicts unusable (%s), the default check decides", error)
            return {}
        return {statement.index: verdicts[n] for n, statement in enumerate(batch, 1)}

    def _render(self, statements: str) -> str:
        return self._prompts.render("ground", statements=statements)
