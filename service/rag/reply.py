"""What a request produces: a Reply (its last LLM request still to go), then the Answer.

    >>> reply = await pipeline.run(query)
    >>> answer = await reply.complete()            # whole
    >>> async for text in reply: ...               # or streamed, then
    >>> answer = await reply.answer()

One response object for streamed and whole, as simonw/llm's: `answer()` on a reply whose text
was never read reads it first, so it can never return an empty answer by mistake. A request
sent beside the last one (`Beside`: the verification, with an LLM elsewhere) is waited for
on that one path too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

from service import tracing
from service.chains import ChainResult
from service.chains.result import Prepared, Source, says_nothing_relevant
from service.chains.short_answer import phrase, true_citation
from service.deadline import Deadline
from service.grounding import Grounding
from service.llm import ChatClient, Usage
from service.llm.answer_format import PLAIN, AnswerFormat
from service.llm.types import TokenChoice
from service.metrics import observe_answer
from service.rag.gate import WHOLE, Gate, Hold
from service.text.citations import cited_numbers


@dataclass(frozen=True)
class AnswerDocument:
    """A source listed with the answer: a document whose text the LLM was given."""

    id: str
    title: str
    url: str
    content: str
    number: int
    cited: bool


@dataclass
class Answer:
    """What a request produced: the answer, its sources, timings and cost."""

    message: str
    documents: list[AnswerDocument]
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"  # "length" when max_tokens cut the answer
    grounding: Grounding | None = None  # each sentence checked (grounding.enabled)
    cache_age: float | None = None  # seconds, when the answer came from the answer cache
    abstained: str | None = None  # why the answer is "not in the documents"; None: it answers
    confidence: dict[str, Any] | None = None  # the model's own (service.rag.stages.confidence)

    def add_usage(self, usage: Usage) -> None:
        self.llm_calls += 1
        self.usage += usage


class Timings(dict[str, float]):
    """Milliseconds per stage."""

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.since(name, started)

    def since(self, name: str, started: float) -> None:
        self[name] = round((time.perf_counter() - started) * 1000, 1)


@dataclass(frozen=True)
class Amendment:
    """What an answer stage changes of the answer: its message (whose citations then mark
    the sources cited), its grounding report, the LLM calls the stage made, the age of a
    cached answer, an abstention (the answer then lists no sources). None: unchanged."""

    message: str | None = None
    grounding: Grounding | None = None
    usages: tuple[Usage, ...] = ()
    cache_age: float | None = None
    abstained: str | None = None  # why the answer became "not in the documents"
    confidence: dict[str, Any] | None = None
    finish_reason: str | None = None  # the message's own, when another request wrote it


@dataclass
class Finishing:
    """An answer once its text is known, on its way out: the Answer being finished (the
    answer stages' amendments change it, through `take` alone), the chain's result it was
    made of, and whether it says the documents hold nothing."""

    answer: Answer
    result: ChainResult
    found_nothing: bool
    written: str = ""  # the answer as the LLM wrote it, before the short answer's cut
    # the request's deadline, which the stages run within (one may bound its own work by it)
    deadline: Deadline = field(default_factory=lambda: Deadline(float("inf")))

    def take(self, amendment: Amendment) -> None:
        """An answer stage's amendment written into the answer."""
        answer = self.answer
        if amendment.message is not None and amendment.message != answer.message:
            cited = cited_numbers(amendment.message)
            answer.documents = [replace(d, cited=d.number in cited) for d in answer.documents]
            answer.message = amendment.message
        for usage in amendment.usages:
            answer.add_usage(usage)
        if amendment.grounding is not None:
            answer.grounding = amendment.grounding
        if amendment.cache_age is not None:
            answer.cache_age = amendment.cache_age
        if amendment.confidence is not None:
            answer.confidence = amendment.confidence
        if amendment.finish_reason is not None:
            answer.finish_reason = amendment.finish_reason
        if amendment.abstained is not None:
            answer.abstained = amendment.abstained
            if amendment.finish_reason is None:  # the not-found sentence, whole: not cut
                answer.finish_reason = "stop"
            answer.documents = []
            self.found_nothing = True  # the stages after it see an abstention


class AnswerStage(Protocol):
    """A stage that runs once the answer's text is known (grounding, the answer cache): the
    Reply runs those it holds, in order, within the request's deadline (a `timed` one under
    its name), and writes what each returns into the answer."""

    name: ClassVar[str]
    timed: ClassVar[bool]

    def wanted(self, done: Finishing) -> bool: ...

    async def run(self, done: Finishing) -> Amendment | None: ...


class Beside(Protocol):
    """A request sent beside the answer's, whose word the answer waits for (the verification
    with an LLM elsewhere: service.rag.stages.beside): it holds the answer's text while it is
    on its way (`sent`, done once its word is known or it failed); then `wanted` says whether
    the answer still is (its failure raised), `usages` what it cost."""

    @property
    def sent(self) -> asyncio.Future[Any]: ...

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool: ...

    def wanted(self) -> bool: ...

    def usages(self) -> tuple[Usage, ...]: ...


@dataclass
class Reply:
    """A request whose retrieval and intermediate LLM calls are done, its last request to go.

    `await reply.complete()` sends that request and returns the Answer; or `async for text in
    reply` for the answer's text as the LLM writes it, then `await reply.answer()`. One path
    (`Prepared.finish`) either way, within the request's deadline. A JSON answer is checked
    whole before any of it is sent, so it streams as one piece. What of the text is shown as
    it is written, the reply asks its `Gate` (service.rag.gate), given its `holds`. A request
    sent `beside` it holds the text too, until its word: an answer it refuses is abandoned, an
    answer written first waits for it.
    """

    llm: ChatClient
    prepared: Prepared
    timings: Timings
    started: float
    chain_started: float
    extra_usage: tuple[Usage, ...] = ()
    form: AnswerFormat = PLAIN
    deadline: Deadline = field(default_factory=lambda: Deadline(float("inf")))
    # a question's answer that says the documents hold nothing lists none of them as sources
    # (a summary keeps its document whatever it says)
    sources_only_if_found: bool = True
    # what runs once the text is known: grounding, the answer cache (service.rag.stages)
    finishing: tuple[AnswerStage, ...] = ()
    # the stage whose last request this is: its time runs until the text is read
    stage: str = "chain"
    # what holds a streamed answer back until it is judged (service.rag.gate)
    holds: tuple[Hold, ...] = ()
    # ask the LLM for the answer's token probabilities (llm.logprobs)
    probabilities: bool = False
    # the question a short answer is cut to the phrase of (prompt.answer.phrase); None: kept
    phrase_of: str | None = None
    # a request sent beside this one, whose word the answer waits for (the verification)
    beside: Beside | None = None
    # where the text is: not asked yet, being read, read to its end
    _text: str = field(default="unread", init=False, repr=False)
    _answer: Answer | None = field(default=None, init=False, repr=False)

    @property
    def model(self) -> str:
        """The model the answer comes from (the request's, or llm.model)."""
        return self.llm.options.model

    async def complete(self) -> Answer:
        """The whole answer (the text read at once, nothing streamed)."""
        async for _ in self._texts(stream=False):
            pass
        return await self.answer()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._texts(stream=True)

    async def _texts(self, *, stream: bool) -> AsyncIterator[str]:
        if self._text != "unread":
            raise RuntimeError("a Reply's text can be read once: keep the Answer instead")
        self._text = "reading"
        stream = stream and not self.form.json
        texts = self.prepared.finish(
            self.llm, stream=stream, form=self.form, probabilities=self.probabilities
        )
        beside = (self.beside,) if self.beside is not None else ()
        gate = Gate(
            self.prepared.scaffolding,
            holds=(*beside, *self.holds, *self._whole()) if stream else (),
            citation_last=self.form.grammar is not None,
        )
        try:
            async for text in self.deadline.stream(self._while_wanted(texts)):
                if fresh := gate.feed(text, self.prepared.result.tokens):
                    yield fresh
                    # pieces already buffered would otherwise be sent in one go, without the
                    # event loop ever running: a client that left is then written to thousands
                    # of times, and the LLM stream goes on, before its disconnect is noticed
                    await asyncio.sleep(0)
        finally:  # the answer failed, or its reader left: what was sent beside it is not awaited
            if self.beside is not None:
                self.beside.sent.cancel()
        if fresh := gate.flush(self.prepared.result.tokens):
            yield fresh
        self._text = "read"
        # what was held, or what the answer stages made of it (an abstention)
        if stream and (fresh := gate.rest((await self.answer()).message)):
            yield fresh

    async def _while_wanted(self, texts: AsyncGenerator[str, None]) -> AsyncIterator[str]:
        """The answer's pieces as they are written while the request sent beside it (`beside`)
        has not refused it: once its word says no, the answer's request is abandoned (closed,
        never read to its end); an answer written before its word waits for it. An empty
        piece: the word came, what was held may be shown."""
        beside = self.beside
        async with aclosing(texts):
            if beside is None:
                async for text in texts:
                    yield text
                return
            result = self.prepared.result
            calls = result.llm_calls  # the answer's request is counted once read
            asked = False
            piece: asyncio.Task[str] | None = None  # the answer's next piece, on its way
            try:
                while not beside.sent.done():
                    piece = piece or asyncio.create_task(_next(texts))
                    asked = True
                    await asyncio.wait((piece, beside.sent), return_when=asyncio.FIRST_COMPLETED)
                    if not piece.done():
                        continue  # the word came first
                    try:
                        text = piece.result()
                    except StopAsyncIteration:  # the answer whole before the word: it waits
                        piece = None
                        await asyncio.wait((beside.sent,))
                        beside.wanted()  # its failure raised; its no, the answer stages'
                        return
                    piece = None
                    yield text
                if not beside.wanted():  # its failure raised
                    if asked and result.llm_calls == calls:  # sent all the same: one call
                        result.add_usage(Usage())
                    return  # the answer's request abandoned (below)
                yield ""
                if piece is not None:
                    try:
                        text = await piece
                    except StopAsyncIteration:
                        return
                    piece = None
                    yield text
                async for text in texts:
                    yield text
            finally:
                if piece is not None and not piece.done():
                    piece.cancel()
                    await asyncio.wait((piece,))
                if piece is not None and not piece.cancelled():
                    piece.exception()  # retrieved: the failure that matters is raised above

    def _whole(self) -> tuple[Hold, ...]:
        """A short answer cut to its phrase is streamed once whole (the cut known at its end)."""
        return (WHOLE,) if self.phrase_of is not None and self.form.grammar is not None else ()

    async def answer(self) -> Answer:
        """The Answer once its text is known (read now if it was never asked for), finished
        by the reply's answer stages (grounding may change it, or refuse it: NoValidAnswer;
        the answer cache keeps it, or says it is a repeated one)."""
        if self._text == "unread":
            return await self.complete()
        if self._text == "reading":
            raise RuntimeError("the answer's text is still being read: read it to its end first")
        if self._answer is not None:
            return self._answer
        self.timings.since(self.stage, self.chain_started)
        result = self.prepared.result
        written = result.answer
        if self.form.grammar is not None:  # the short answer: its citation made true, cut
            result.answer = shaped(result.answer, result.sources, self.phrase_of)
        found_nothing = not cited_numbers(result.answer) and says_nothing_relevant(result.answer)
        answer = answer_of(result, result.answer)
        for usage in (*self.extra_usage, *(self.beside.usages() if self.beside else ())):
            answer.add_usage(usage)
        if found_nothing:
            read = len(result.sources)
            answer.abstained = (
                f"the LLM read {read} source{'s' if read != 1 else ''} and said they do not "
                "hold the answer"
            )
            if self.sources_only_if_found:
                answer.documents = []
        done = Finishing(answer, result, found_nothing, written, self.deadline)
        for stage in self.finishing:
            if stage.wanted(done):
                timed = self.timings.stage(stage.name) if stage.timed else nullcontext()
                with tracing.stage(stage.name), timed:
                    amendment = await self.deadline.run(stage.run(done))
                if amendment is not None:
                    done.take(amendment)
        self.timings["llm"] = round(self.llm.busy.seconds * 1000, 1)
        self.timings.since("total", self.started)
        answer.timings = dict(self.timings)
        observe_answer(
            answer.timings,
            llm_calls=answer.llm_calls,
            prompt_tokens=answer.usage.prompt_tokens,
            completion_tokens=answer.usage.completion_tokens,
            documents=len(answer.documents),
        )
        self._answer = answer
        return answer


async def _next(texts: AsyncIterator[str]) -> str:
    """The next piece of `texts` (StopAsyncIteration at their end), as a task can wait for."""
    return await anext(texts)


def shaped(answer: str, sources: Sequence[Source], phrase_of: str | None) -> str:
    """A short answer's citation made true (`true_citation`) and, for a question a phrase
    answers (`phrase_of`), the answer cut to that phrase."""
    answer = true_citation(answer, sources)
    return phrase(answer, phrase_of) if phrase_of is not None else answer


def answer_of(result: ChainResult, message: str) -> Answer:
    """The Answer of a chain's result saying `message`: its sources, each marked cited when
    the message cites its number."""
    cited = cited_numbers(message)
    return Answer(
        message=message,
        documents=[
            AnswerDocument(
                id=source.document.source_id,
                title=source.document.title,
                url=source.document.url,
                content="\n\n".join(source.snippets),
                number=source.number,
                cited=source.number in cited,
            )
            for source in result.sources
        ],
        llm_calls=result.llm_calls,
        usage=result.usage,
        finish_reason=result.finish_reason,
    )
