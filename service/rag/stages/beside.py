"""Verifying: the verification sent beside the answer (grounding.verify.parallel; issue 70).

Asked before the answer (Verify), the verification ("does a document above say the answer?",
one token) and the answer are two round trips to the LLM in a row: with an LLM elsewhere (a
GPU server 300 ms away), twice a question's wait. Sent beside the answer's request, it costs
none: the answer's text is held (a Hold, service.rag.gate) until its probability of yes is
known; below grounding.abstain.unsupported the answer's request is abandoned (closed, never
read to its end) and the answer is the not-found sentence, `abstained` saying why as when it
is not asked; else what was held is shown and the stream goes on. An answer written before
the verification's word waits for it (the Reply, within the request's deadline). Its call,
its time (`timings.verify`) and its failure are the verification's as when it is asked
first: one that fails fails the answer, one without probabilities leaves it alone.

The embedded model keeps the two in turn (grounding.verify.parallel=auto): llama.cpp's prompt
cache serves the answer's request what the verification's read, and two prompts at once on a
few cores are no sooner answered than one after the other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from service.flights import left_behind
from service.llm.types import TokenChoice, Usage
from service.rag.honesty import unsupported
from service.rag.reply import Timings

Said = tuple[float | None, Usage]  # the verification's probability of yes, and its call's cost


@dataclass
class Verifying:
    """The verification on its way beside the answer (the module's docstring): it holds the
    answer's text while it is; then its probability of yes, and whether the answer is still
    wanted. The Reply waits for it (`sent`) and abandons the answer it refuses.

    >>> verifying = Verifying.send(verified(llm, request), timings, min_supported=0.55)
    >>> Reply(..., beside=verifying)"""

    sent: asyncio.Task[Said]  # done once its word is known, or it failed
    min_supported: float | None  # grounding.abstain.unsupported; None: reported only

    @classmethod
    def send(
        cls, asked: Awaitable[Said], timings: Timings, min_supported: float | None
    ) -> Verifying:
        """The verification `asked` sent now, its time written under "verify" once known."""
        started = time.perf_counter()

        async def timed() -> Said:
            try:
                return await asked
            finally:
                timings.since("verify", started)

        sent = asyncio.create_task(timed())
        sent.add_done_callback(left_behind)
        return cls(sent, min_supported)

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        """The answer is held while the verification is on its way (service.rag.gate)."""
        return not self.sent.done()

    @property
    def supported(self) -> float | None:
        """Its probability of yes (None: on its way, failed, or none reported)."""
        if not self.sent.done() or self.sent.cancelled() or self.sent.exception() is not None:
            return None
        return self.sent.result()[0]

    def wanted(self) -> bool:
        """Once its word is known: whether the answer is still wanted; its failure raised, as
        when it is asked first."""
        supported, _ = self.sent.result()
        return not unsupported(supported, self.min_supported)

    def usages(self) -> tuple[Usage, ...]:
        """What its call cost, once known."""
        if self.sent.done() and not self.sent.cancelled() and self.sent.exception() is None:
            return (self.sent.result()[1],)
        return ()
