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
call budget (llm.max.calls.per.request) has one left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from service.chains.result import Source, clean_answer
from service.chains.scaffolding import Scaffolding
from service.errors import NoValidAnswer, Overloaded, TechnicalError
from service.llm import ChatClient, ChatMessage, Usage
from service.llm.answer_format import AnswerFormat
from service.rag.reply import shaped

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Again:
    """The second answer: its text (shaped as the first was) and what its call cost."""

    text: str
    usage: Usage


@dataclass(frozen=True)
class AskAgain:
    """What asking again needs of the answer's request (the module's docstring)."""

    llm: ChatClient
    request: tuple[ChatMessage, ...]  # the answer's request (Prepared.final)
    follow_up: ChatMessage  # prompts/again.j2, rendered
    form: AnswerFormat  # the answer's form: the short answer's grammar, when it had one
    sources: tuple[Source, ...]  # what the citation is made true against
    phrase_of: str | None  # the question a short answer is cut to the phrase of
    scaffolding: Scaffolding | None = None  # the templates' words, taken out of the answer

    async def run(self, written: str) -> Again | None:
        """The answer asked again after `written` (the echo as the model wrote it); None when
        no call is left or the LLM fails (the refusal stands)."""
        if self.llm.calls.left < 1:
            return None
        messages = [*self.request, ChatMessage("assistant", written), self.follow_up]
        try:
            completion = await self.llm.complete(messages, self.form.payload())
        except (TechnicalError, Overloaded) as error:  # the refusal stands
            log.warning("asking an echo's answer again failed: %s", error)
            return None
        try:
            text = clean_answer(completion.text, self.scaffolding)
        except NoValidAnswer:  # empty, or the prompt's own words: no second answer
            return Again("", completion.usage)
        if self.form.grammar is not None:
            text = shaped(text, self.sources, self.phrase_of)
        return Again(text, completion.usage)
