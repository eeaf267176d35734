"""What a request's stages share: the state they read and write, and what a stage is."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, TypeVar

from service.cache import CacheKey
from service.chains import (
    NumberedChunk,
    Question,
)
from service.errors import (
    EmptyDocument,
    NoDocumentFound,
    ServiceError,
)
from service.llm import Usage
from service.rag.reply import Reply, Timings
from service.rag.request import RagQuery, SummarizeQuery
from service.retrieval import (
    RetrievedDocument,
)

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class State:
    """What every request's stages share: timings, what intermediate LLM calls cost, the
    documents and their chunks, and the Reply once a stage has made it."""

    timings: Timings = field(default_factory=Timings)
    started: float = field(default_factory=time.perf_counter)
    usages: list[Usage] = field(default_factory=list)
    documents: list[RetrievedDocument] = field(default_factory=list)
    chunks: list[NumberedChunk] = field(default_factory=list)
    reply: Reply | None = None

    def without_text(self) -> ServiceError | None:
        """The error when chunking found no text in the documents, or None to go on."""
        return None


@dataclass(kw_only=True)
class RagState(State):
    """A question's way through the stages."""

    query: RagQuery
    question: Question
    search_query: str  # the query sanitized for Solr; rewriting may replace it
    queries: tuple[str, ...] = ()  # several (multi-query), else the search query alone
    cache_key: CacheKey | None = None  # where a new answer is kept (answer cache on)

    def without_text(self) -> ServiceError | None:
        if self.documents and not self.chunks and not self.query.options.answer_without_sources:
            return NoDocumentFound("the retrieved documents hold no text")
        return None


@dataclass(kw_only=True)
class SummaryState(State):
    """A summary's way through the stages."""

    query: SummarizeQuery

    def without_text(self) -> ServiceError | None:
        if not self.chunks:
            name = self.documents[0].id if self.documents else ""
            return EmptyDocument(f"document {name!r} has no text to summarize")
        return None


S = TypeVar("S", bound=State, contravariant=True)


class Stage(Protocol[S]):
    """One step of a request: timed under `name` by the pipeline's loop."""

    name: str
    calls_llm: bool

    def wanted(self, state: S) -> bool:
        """Whether this request needs the stage (settings that turn it off leave it out of
        the pipeline instead)."""
        ...

    async def run(self, state: S) -> None: ...


class EveryRequest:
    """What most stages are: wanted by every request (unless they say otherwise), no LLM call
    (a chain's last call, the answer's, is always kept: see Pipeline)."""

    calls_llm: ClassVar[bool] = False

    def wanted(self, state: State) -> bool:
        return True


class WritesQueries:
    """A stage whose LLM call writes search queries: of no use when the request names its one
    document (`id`)."""

    calls_llm: ClassVar[bool] = True

    def wanted(self, state: RagState) -> bool:
        return state.query.document_id is None
