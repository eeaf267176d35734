"""What a request produces: a Reply (its last LLM request still to go), then the Answer.

    >>> reply = await pipeline.run(query)
    >>> answer = await reply.complete()            # whole
    >>> async for text in reply: ...               # or streamed, then
    >>> answer = await reply.answer()

One response object for streamed and whole, as simonw/llm's: `answer()` on a reply whose text
was never read reads it first, so it can never return an empty answer by mistake.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from service.cache import AnswerCache, CachedAnswer, CachedDocument, CachedPayload, CacheKey
from service.chains import ChainResult
from service.chains.result import Prepared, Source, says_nothing_relevant
from service.chains.short_answer import true_citation
from service.deadline import Deadline
from service.grounding import Grounding, GroundingPolicy
from service.llm import ChatClient, Usage
from service.llm.answer_format import PLAIN, AnswerFormat
from service.metrics import observe_answer
from service.retrieval import RetrievedDocument

CITATION = re.compile(r"\[(\d{1,3})\]")  # a source cited: [1]


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


@dataclass
class Reply:
    """A request whose retrieval and intermediate LLM calls are done, its last request to go.

    `await reply.complete()` sends that request and returns the Answer; or `async for text in
    reply` for the answer's text as the LLM writes it, then `await reply.answer()`. One path
    (`Prepared.finish`) either way, within the request's deadline. A JSON answer is checked
    whole before any of it is sent, so it streams as one piece.
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
    grounding: GroundingPolicy | None = None
    # the stage whose last request this is: its time runs until the text is read
    stage: str = "chain"
    # the answer cache: the entry this reply repeats, or where its answer is to be kept
    cached: CachedAnswer | None = None
    cache: tuple[AnswerCache, CacheKey] | None = None
    # where the text is: not asked yet, being read, read to its end
    _text: str = field(default="unread", init=False, repr=False)

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
        texts = self.prepared.finish(self.llm, stream=stream, form=self.form)
        async for text in self.deadline.stream(texts):
            yield text
            # pieces already buffered would otherwise be sent in one go, without the event
            # loop ever running: a client that left is then written to thousands of times,
            # and the LLM stream goes on, before its disconnect is noticed
            await asyncio.sleep(0)
        self._text = "read"

    async def answer(self) -> Answer:
        """The Answer once its text is known (read now if it was never asked for), checked
        against its sources (grounding on), which may change it (drop) or refuse it
        (NoValidAnswer)."""
        if self._text == "unread":
            return await self.complete()
        if self._text == "reading":
            raise RuntimeError("the answer's text is still being read: read it to its end first")
        self.timings.since(self.stage, self.chain_started)
        result = self.prepared.result
        if self.form.grammar is not None:  # the short answer: its citation made true
            result.answer = true_citation(result.answer, result.sources)
        found_nothing = not cited_numbers(result.answer) and says_nothing_relevant(result.answer)
        grounded = None
        if self.grounding is not None and self.cached is None:
            with self.timings.stage("grounding"):
                grounded = await self.deadline.run(
                    self.grounding.run(
                        result.answer, _source_texts(result), found_nothing=found_nothing
                    )
                )
        self.timings["llm"] = round(self.llm.busy.seconds * 1000, 1)
        self.timings.since("total", self.started)
        answer = _answer(result, grounded.message if grounded else result.answer, self.timings)
        if found_nothing:
            read = len(result.sources)
            answer.abstained = (
                f"the LLM read {read} source{'s' if read != 1 else ''} and said they do not "
                "hold the answer"
            )
        if self.sources_only_if_found and found_nothing:
            answer.documents = []
        for usage in (*self.extra_usage, *(grounded.usages if grounded else ())):
            answer.add_usage(usage)
        answer.grounding = grounded.grounding if grounded else None
        await self._cached_or_kept(answer)
        observe_answer(
            answer.timings,
            llm_calls=answer.llm_calls,
            prompt_tokens=answer.usage.prompt_tokens,
            completion_tokens=answer.usage.completion_tokens,
            documents=len(answer.documents),
        )
        return answer

    async def _cached_or_kept(self, answer: Answer) -> None:
        """A repeated answer says so (with its grounding report as made); a new one that
        answers (sources, not cut short) is kept in the answer cache."""
        if self.cached is not None:
            answer.cache_age = round(self.cached.age, 1)
            answer.grounding = self.cached.grounding
        elif self.cache is not None and answer.documents and answer.finish_reason == "stop":
            cache, key = self.cache
            await cache.store(key, _cache_payload(answer))


def repeated(
    hit: CachedAnswer, llm: ChatClient, timings: Timings, started: float, form: AnswerFormat
) -> Reply:
    """A Reply whose answer is a cached one: no LLM call, its text sent (or streamed) as is."""
    sources = [
        Source(d.number, RetrievedDocument(d.id, d.title, d.url, d.content), (d.content,))
        for d in hit.payload.documents
    ]
    message = hit.payload.message
    result = ChainResult(answer=message, sources=sources, finish_reason=hit.payload.finish_reason)
    prepared = Prepared(result, answer=message)
    return Reply(llm, prepared, timings, started, time.perf_counter(), form=form, cached=hit)


def cited_numbers(answer: str) -> set[int]:
    """The source numbers an answer cites ([1], [2]...)."""
    return {int(number) for number in CITATION.findall(answer)}


def _source_texts(result: ChainResult) -> list[tuple[int, str]]:
    """What each source sent to the LLM said, under its number: what grounding checks."""
    return [(source.number, text) for source in result.sources for text in source.snippets]


def _answer(result: ChainResult, message: str, timings: Timings) -> Answer:
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
        timings=dict(timings),
        llm_calls=result.llm_calls,
        usage=result.usage,
        finish_reason=result.finish_reason,
    )


def _cache_payload(answer: Answer) -> CachedPayload:
    """What the answer cache keeps of an answer."""
    return CachedPayload(
        message=answer.message,
        documents=[
            CachedDocument(id=d.id, title=d.title, url=d.url, content=d.content, number=d.number)
            for d in answer.documents
        ],
        grounding=answer.grounding.to_json() if answer.grounding else None,
        finish_reason=answer.finish_reason,
    )
