"""Chain: the prompt chain that writes the answer (stuff, map-reduce, refine), leaving the Reply."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from service.chains import (
    ChainResult,
    MapReduceChain,
    NumberedChunk,
    PromptBuilder,
    PromptLibrary,
    RefineChain,
    StuffChain,
    short_answer,
)
from service.chains.result import Prepared
from service.llm import ChatClient, ChatMessage
from service.llm.answer_format import AnswerFormat
from service.llm.size import RequestSize
from service.rag.gate import Hold
from service.rag.reply import Reply
from service.rag.request import RagQuery
from service.rag.stages.after_answer import AfterAnswer, Judged
from service.rag.stages.again import AskAgain
from service.rag.stages.echo import EchoHold
from service.rag.stages.state import EveryRequest, RagState


@dataclass
class Chain(EveryRequest):
    """The prompt chain (stuff, map-reduce or refine) up to its last request, and the Reply
    that sends it; without chunks (openai.no.context=answer), the conversation alone. An
    answer the verification (Verify, before it) found unsupported is not asked for; one it is
    sent beside waits for its word (the Reply's `beside`)."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    strategy: str
    concurrency: int
    answer_reserve: int  # room kept for an earlier answer carried into a request
    after: AfterAnswer  # the answer stages, and the honest-answer settings
    # the short answer's form (prompt.answer.form): a grammar over the sources sent
    short: bool = False
    name: ClassVar[str] = "chain"
    calls_kept: ClassVar[int] = 1  # the answer's call: earlier stages leave it

    async def run(self, state: RagState) -> Reply:
        chain_started = time.perf_counter()
        builder = PromptBuilder(self.prompts, state.question)
        chain = self._chain(builder, state.chunks) if state.chunks else None
        if chain is not None:
            prepared = await chain.prepare(state.chunks)
        else:  # nothing relevant, and the caller wants the LLM's answer without sources
            request = state.query
            conversation = [*state.question.history, ChatMessage("user", request.query)]
            prepared = Prepared(
                ChainResult(answer="", sources=[]),
                final=conversation,
                scaffolding=self.prompts.scaffolding,
            )
        form = self._form(state.query, prepared, state.question.not_found)
        phrase_of = self._phrase_of(state, form)
        judged: Judged | None = None
        if state.chunks and not form.json:  # a caller's JSON is checked by its schema
            again = None
            if isinstance(chain, StuffChain) and prepared.final is not None:
                again = AskAgain(
                    self.llm, prepared, builder, form, phrase_of, self.after.honesty.logprobs
                )
            judged = self.after.judged(state, prepared.result, again)
            if judged.doubt.unsupported():  # the answer is not asked for
                prepared = replace(prepared, final=None, answer=state.question.not_found)
        return Reply(
            self.llm,
            prepared,
            state.timings,
            state.started,
            chain_started,
            tuple(state.usages),
            form,
            finishing=self.after.stages(state, judged),
            holds=() if judged is None else _holds(judged),
            probabilities=self.after.honesty.logprobs,
            phrase_of=phrase_of,
            beside=state.beside,
        )

    def _phrase_of(self, state: RagState, form: AnswerFormat) -> str | None:
        """The question a short answer is cut to the phrase of (prompt.answer.phrase): a
        question a phrase answers, with the short answer's grammar."""
        question = state.question.text
        wanted = self.after.honesty.phrase and form.grammar is not None
        return question if wanted and short_answer.phrase_answers(question) else None

    def _form(self, query: RagQuery, prepared: Prepared, not_found: str) -> AnswerFormat:
        """The caller's form; the short answer's grammar added when it applies: a stuff
        request with sources, and no form the caller asked (a format, JSON, stops)."""
        form = query.options.form
        numbers = [source.number for source in prepared.result.sources]
        asked = query.format != "default" or form.json or form.stop
        if not self.short or self.strategy != "stuff" or not numbers or asked:
            return form
        return replace(form, grammar=short_answer.grammar(numbers, not_found=not_found))

    def _chain(
        self, builder: PromptBuilder, chunks: list[NumberedChunk]
    ) -> StuffChain | MapReduceChain | RefineChain:
        stuff = StuffChain(self.llm, builder, self.size)
        if self.strategy == "stuff" or stuff.fits_in_one_request(chunks):
            return stuff
        if self.strategy == "mapreduce":
            return MapReduceChain(
                self.llm,
                builder,
                self.size,
                concurrency=self.concurrency,
                answer_reserve=self.answer_reserve,
            )
        return RefineChain(self.llm, builder, self.size, answer_reserve=self.answer_reserve)


def _holds(judged: Judged) -> tuple[Hold, ...]:
    """What holds the streamed answer back: the doubt, the echo check, then grounding."""
    echo = () if judged.echo is None else (EchoHold(judged.echo.check),)
    grounding = () if judged.grounding is None else (judged.grounding,)
    return (judged.doubt, *echo, *grounding)
