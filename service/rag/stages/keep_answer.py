"""KeepAnswer and Repeated: the answer cache's side of a finished answer. A new answer that
answers (sources, not cut short) is kept; a repeated one says how old it is and carries the
grounding report it was kept with. (CacheLookup, before the chain, finds them.)"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from service.cache import AnswerCache, CachedAnswer, CachedDocument, CachedPayload, CacheKey
from service.chains import ChainResult
from service.chains.result import Prepared, Source
from service.llm import ChatClient
from service.llm.answer_format import AnswerFormat
from service.rag.reply import Amendment, Answer, Finishing, Reply, Timings
from service.retrieval import RetrievedDocument


@dataclass
class KeepAnswer:
    """A new answer kept in the answer cache under its key."""

    cache: AnswerCache
    key: CacheKey
    name: ClassVar[str] = "cache_write"
    timed: ClassVar[bool] = False

    def wanted(self, done: Finishing) -> bool:
        return bool(done.answer.documents) and done.answer.finish_reason == "stop"

    async def run(self, done: Finishing) -> None:
        await self.cache.store(self.key, payload_of(done.answer))


@dataclass
class Repeated:
    """An answer the cache held: its age and its grounding report as made."""

    hit: CachedAnswer
    name: ClassVar[str] = "cache_hit"
    timed: ClassVar[bool] = False

    def wanted(self, done: Finishing) -> bool:
        return True

    async def run(self, done: Finishing) -> Amendment:
        return Amendment(grounding=self.hit.grounding, cache_age=round(self.hit.age, 1))


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
    return Reply(llm, prepared, timings, started, time.perf_counter(), form=form,
                 finishing=(Repeated(hit),))  # fmt: skip


def payload_of(answer: Answer) -> CachedPayload:
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
