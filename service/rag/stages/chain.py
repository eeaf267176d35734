"""Chain: the prompt chain that writes the answer (stuff, map-reduce, refine), leaving the Reply."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from service.cache import AnswerCache
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
from service.grounding import GroundingPolicy
from service.llm import ChatClient, ChatMessage
from service.llm.answer_format import AnswerFormat
from service.llm.size import RequestSize
from service.rag.reply import AnswerStage, Reply
from service.rag.request import RagQuery
from service.rag.stages.confidence import Doubt, verified
from service.rag.stages.echo import RefuseEcho
from service.rag.stages.ground import Ground
from service.rag.stages.keep_answer import KeepAnswer
from service.rag.stages.state import EveryRequest, RagState


@dataclass
class Chain(EveryRequest):
    """The prompt chain (stuff, map-reduce or refine) up to its last request, and the Reply
    that sends it; without chunks (openai.no.context=answer), the conversation alone."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    strategy: str
    concurrency: int
    answer_reserve: int  # room kept for an earlier answer carried into a request
    grounding: GroundingPolicy | None
    cache: AnswerCache | None
    # the short answer's form (prompt.answer.form): a grammar over the sources sent
    short: bool = False
    logprobs: bool = False  # llm.logprobs: the answer's token probabilities asked for
    abstain_not_found: float | None = None  # grounding.abstain.not.found
    echo: bool = True  # grounding.echo
    verify: bool = False  # grounding.verify
    abstain_unsupported: float | None = None  # grounding.abstain.unsupported
    name: ClassVar[str] = "chain"

    @property
    def calls_kept(self) -> int:
        """The LLM calls earlier stages must leave it: the answer's, and the verification's
        when it asks one (grounding.verify with llm.logprobs)."""
        return 2 if self.verify and self.logprobs else 1

    async def run(self, state: RagState) -> Reply:
        chain_started = time.perf_counter()
        if state.chunks:
            builder = PromptBuilder(self.prompts, state.question)
            prepared = await self._chain(builder, state.chunks).prepare(state.chunks)
        else:  # nothing relevant, and the caller wants the LLM's answer without sources
            request = state.query
            conversation = [*state.question.history, ChatMessage("user", request.query)]
            prepared = Prepared(ChainResult(answer="", sources=[]), final=conversation)
        form = self._form(state.query, prepared, state.question.not_found)
        finishing: list[AnswerStage] = []  # once the answer's text is known, in this order
        shown_when = None
        if state.chunks and not form.json:  # a caller's JSON is checked by its schema
            not_found = state.question.not_found
            supported = None
            # (a budget spent by the chain's own plan leaves the answer its call: no verification)
            verifying = self.verify and self.logprobs and self.llm.calls.left >= 2
            if verifying and prepared.verification is not None:
                with state.timings.stage("verify"):
                    supported, usage = await verified(self.llm, prepared.verification)
                state.usages.append(usage)
            doubt = Doubt(not_found, self.abstain_not_found, supported, self.abstain_unsupported)
            asked = not doubt.unsupported()
            if not asked:  # the answer is not asked for: no text to check for an echo
                prepared = Prepared(prepared.result, answer=not_found)
            result = prepared.result
            echo = (
                RefuseEcho.of(state.query.query, result, not_found) if self.echo and asked else None
            )
            finishing += [doubt] if echo is None else [doubt, echo]
            check = echo.check if echo is not None else None

            def shown_when(written: str) -> bool:
                if doubt.unsure(result.tokens):
                    return False
                return check is None or check.shown_yet(written)

        if self.grounding is not None:
            finishing.append(Ground(self.grounding))
        if self.cache is not None and state.cache_key is not None:
            finishing.append(KeepAnswer(self.cache, state.cache_key))  # where it is kept
        return Reply(
            self.llm,
            prepared,
            state.timings,
            state.started,
            chain_started,
            tuple(state.usages),
            form,
            finishing=tuple(finishing),
            shown_when=shown_when,
            probabilities=self.logprobs,
        )

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
