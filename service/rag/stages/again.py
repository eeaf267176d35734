"""AskAgain: an echo's second chance (grounding.echo.again; issue 69, item 3).

A small model that read the answer sometimes writes the question back around nothing ("The
Middle Rhine flows between Bingen and Bonn. [1]" for "Where does the Middle Rhine flow between
Bingen and Bonn?") while, asked before, it said a document holds the answer. The echo check
refuses such an answer; asked again (the answer's request, the echo as the model's turn, then
prompts/again.j2: "That only says the question again. Which words of the documents answer
...?"), the model mostly names what it had left out. The second answer is shaped as the first
(the short answer's citation made true, cut to its phrase) and judged by the same echo check:
an echo again, the not-found sentence or a failed request leave the refusal as it was.

One LLM call more, only for an answer the echo check refuses, and only while the request's
call budget (llm.max.calls.per.request) has one left; within what request.timeout leaves it
(less `LEFT_AFTER`), so that a second asking that would end past it is given up and the
refusal stands, rather than the whole answer failing with a 504.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from service.chains import PromptBuilder
from service.chains.result import PROBABILITIES, Prepared, clean_answer
from service.deadline import Deadline
from service.errors import NoValidAnswer, Overloaded, TechnicalError
from service.llm import ChatClient, ChatMessage, Usage
from service.llm.answer_format import AnswerFormat
from service.llm.types import TokenChoice
from service.rag.reply import shaped

log = logging.getLogger(__name__)

# seconds of the request's deadline the second asking leaves to what follows it (the answer
# stages after the echo check, the answer's way out)
LEFT_AFTER = 1.0


@dataclass(frozen=True)
class Again:
    """The second answer: its text (shaped as the first was), what its call cost, why the
    model stopped and its tokens' probabilities (when the first answer's were asked for);
    `failed`: the request was sent and failed (or was given up at the deadline), no text."""

    text: str
    usage: Usage
    failed: bool = False
    finish_reason: str = "stop"
    tokens: tuple[TokenChoice, ...] = ()


@dataclass(frozen=True)
class AskAgain:
    """What asking again needs of the answer's request (the module's docstring)."""

    llm: ChatClient
    prepared: Prepared  # the answer's request (its `final`), its sources and scaffolding
    builder: PromptBuilder  # renders prompts/again.j2, only when an echo is asked again
    form: AnswerFormat  # the answer's form: the short answer's grammar, when it had one
    phrase_of: str | None  # the question a short answer is cut to the phrase of
    probabilities: bool = False  # llm.logprobs: the second answer's asked for as the first's

    async def run(self, written: str, deadline: Deadline) -> Again | None:
        """The answer asked again after `written` (the echo as the model wrote it), within
        what `deadline` leaves it; None when no call or no time is left. A request that fails
        or is given up is an Again that `failed` (the call counted, the refusal stands)."""
        seconds = deadline.remaining() - LEFT_AFTER
        if self.llm.calls.left < 1 or seconds <= 0:
            return None
        follow_up = self.builder.messages("again")[-1]
        messages = [*(self.prepared.final or ()), ChatMessage("assistant", written), follow_up]
        try:
            async with asyncio.timeout(seconds):
                payload = self.form.payload() | (PROBABILITIES if self.probabilities else {})
                completion = await self.llm.complete(messages, payload)
        except (TechnicalError, Overloaded, TimeoutError) as error:  # the refusal stands
            why = error if not isinstance(error, TimeoutError) else "past request.timeout"
            log.warning("asking an echo's answer again failed: %s", why)
            return Again("", Usage(), failed=True)
        try:
            text = clean_answer(completion.text, self.prepared.scaffolding)
        except NoValidAnswer:  # empty, or the prompt's own words: no second answer
            return Again("", completion.usage)
        if self.form.grammar is not None:
            text = shaped(text, self.prepared.result.sources, self.phrase_of)
        return Again(
            text, completion.usage, finish_reason=completion.finish_reason, tokens=completion.tokens
        )
