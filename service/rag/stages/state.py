"""What a request's stages share: the state they read, the typed result each returns, and what
a stage is.

A stage reads the state and returns what it made: search queries (`SearchQuery`, `Queries`),
documents (`Documents`), chunks (`Chunks`), where a new answer will be kept (`CacheMiss`), what
the verification said (`Verification`), or the `Reply`. The loop hands each result to
`State.take`, the one place the state is written."""

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
from service.rag.stages.beside import Verifying
from service.retrieval import (
    RetrievedDocument,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchQuery:
    """The search query a stage wrote (Rewrite): it replaces the sanitized question."""

    text: str
    usage: Usage | None = None


@dataclass(frozen=True)
class Queries:
    """Several search queries for one question (Expand), searched at once and fused."""

    queries: tuple[str, ...]
    usage: Usage | None = None


@dataclass(frozen=True)
class Documents:
    """The documents (or passages) that may answer (Retrieve), or the one to summarize (Fetch)."""

    documents: list[RetrievedDocument]


@dataclass(frozen=True)
class Chunks:
    """The chunks the answer will be written from (ChunkDocuments, then Rerank and Grade
    keep and order them), and what the LLM calls that chose them cost."""

    chunks: list[NumberedChunk]
    usages: tuple[Usage, ...] = ()


@dataclass(frozen=True)
class Verification:
    """What the LLM said, asked whether a document says the answer (Verify): its probability
    of yes (None when it reported none), and what the call cost; or, sent beside the answer
    (grounding.verify.parallel), the verification on its way."""

    supported: float | None
    usage: Usage | None = None
    beside: Verifying | None = None


@dataclass(frozen=True)
class CacheMiss:
    """No cached answer means the same (CacheLookup): where the new answer will be kept."""

    key: CacheKey


StageResult = SearchQuery | Queries | Documents | Chunks | CacheMiss | Verification | Reply


@dataclass(kw_only=True)
class State:
    """What every request's stages share: timings, what intermediate LLM calls cost, the
    documents and their chunks. Written by `take` alone, from the stages' results."""

    timings: Timings = field(default_factory=Timings)
    started: float = field(default_factory=time.perf_counter)
    usages: list[Usage] = field(default_factory=list)
    documents: list[RetrievedDocument] = field(default_factory=list)
    chunks: list[NumberedChunk] = field(default_factory=list)

    def take(self, result: StageResult) -> None:
        """A stage's result written into the state (a Reply ends the loop before this)."""
        match result:
            case Documents(documents):
                self.documents = documents
            case Chunks(chunks, usages):
                self.chunks = chunks
                self.usages.extend(usages)
            case _:
                raise TypeError(f"{type(self).__name__} takes no {type(result).__name__}")

    def without_text(self, chunks: list[NumberedChunk]) -> ServiceError | None:
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
    supported: float | None = None  # the verification's probability of yes (grounding.verify)
    beside: Verifying | None = None  # ... or the verification on its way beside the answer

    def take(self, result: StageResult) -> None:
        if isinstance(result, SearchQuery | Queries | Verification) and result.usage is not None:
            self.usages.append(result.usage)  # what the LLM call that wrote them cost
        match result:
            case SearchQuery(text):
                self.search_query = text
            case Queries(queries):
                self.queries = queries
            case CacheMiss(key):
                self.cache_key = key
            case Verification(supported, _, beside):
                self.supported, self.beside = supported, beside
            case _:
                super().take(result)

    def without_text(self, chunks: list[NumberedChunk]) -> ServiceError | None:
        if self.documents and not chunks and not self.query.options.answer_without_sources:
            return NoDocumentFound("the retrieved documents hold no text")
        return None


@dataclass(kw_only=True)
class SummaryState(State):
    """A summary's way through the stages."""

    query: SummarizeQuery

    def without_text(self, chunks: list[NumberedChunk]) -> ServiceError | None:
        if not chunks:
            name = self.documents[0].id if self.documents else ""
            return EmptyDocument(f"document {name!r} has no text to summarize")
        return None


S = TypeVar("S", bound=State, contravariant=True)


class Stage(Protocol[S]):
    """One step of a request: timed under `name` by the pipeline's loop; `run` reads the
    state and returns what it made (the loop writes it into the state)."""

    name: str
    calls_llm: bool  # skipped when the budget has only the calls kept for later stages left
    # a stage whose calls earlier stages must leave it also says how many: `calls_kept`

    def wanted(self, state: S) -> bool:
        """Whether this request needs the stage (settings that turn it off leave it out of
        the pipeline instead)."""
        ...

    async def run(self, state: S) -> StageResult: ...


class EveryRequest:
    """What most stages are: wanted by every request (unless they say otherwise), no LLM call
    (a chain's last call, the answer's, is always kept: see Pipeline)."""

    calls_llm: ClassVar[bool] = False
    calls_kept: ClassVar[int] = 0

    def wanted(self, state: State) -> bool:
        return True


class WritesQueries:
    """A stage whose LLM call writes search queries: of no use when the request names its one
    document (`id`)."""

    calls_llm: ClassVar[bool] = True
    calls_kept: ClassVar[int] = 0

    def wanted(self, state: RagState) -> bool:
        return state.query.document_id is None
