"""What the service does with an answer once its sentences are checked (grounding.action):
flag them, drop the unsupported ones, or refuse an answer its sources do not carry. Under
flag, an answer none of whose sentences is supported abstains (the not-found sentence): what
no source says is no answer, whatever the action."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from service.errors import NoValidAnswer
from service.grounding.check import Grounding
from service.llm.types import Usage
from service.text.support import MIN_OVERLAP

Action = Literal["flag", "drop", "refuse"]


class Checker(Protocol):
    """GroundingCheck (words, embeddings) or LlmGroundingCheck."""

    usages: Sequence[Usage]  # the LLM calls checking made

    async def run(self, answer: str, sources: Sequence[tuple[int, str]]) -> Grounding: ...


@dataclass(frozen=True)
class Grounded:
    """The answer to send (without its unsupported sentences, under drop), and the report;
    `abstained`: why the answer is to be the not-found sentence instead (none supported)."""

    message: str
    grounding: Grounding
    usages: tuple[Usage, ...] = ()  # what an LLM judge cost
    abstained: str | None = None


@dataclass(frozen=True)
class GroundingPolicy:
    checker: Checker
    action: Action = "flag"
    min_ratio: float = 0.5
    min_overlap: float = MIN_OVERLAP  # the checker's: what a streamed answer is held on

    async def run(
        self, answer: str, sources: Sequence[tuple[int, str]], *, found_nothing: bool = False
    ) -> Grounded:
        """`found_nothing`: the answer only says the documents hold nothing on the question."""
        if self.action == "refuse" and found_nothing:
            raise NoValidAnswer(
                "the answer says the documents hold nothing on the question "
                "(grounding.action=refuse)"
            )
        grounding = await self.checker.run(answer, sources)
        usages = tuple(self.checker.usages)
        if self.action == "refuse" and grounding.ratio < self.min_ratio:
            raise NoValidAnswer(
                f"{grounding.supported} of the answer's {grounding.total} sentences are "
                f"supported by its sources, below grounding.min.ratio = {self.min_ratio:g}"
            )
        if self.action == "drop" and grounding.supported < grounding.total:
            if not grounding.supported:
                raise NoValidAnswer(
                    f"none of the answer's {grounding.total} sentences is supported by its "
                    "sources (grounding.action=drop)"
                )
            return Grounded(grounding.unsupported_removed(answer), grounding, usages)
        if grounding.total and not grounding.supported and not found_nothing:
            why = f"none of the answer's {grounding.total} sentences is supported by its sources"
            return Grounded(answer, grounding, usages, abstained=why)
        return Grounded(answer, grounding, usages)
