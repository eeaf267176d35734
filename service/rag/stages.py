"""The stages of a request, each one class: what it needs is given when it is built (by
`service.rag.assemble`), what it reads and writes is the request's state.

    /ai/rag:       CacheLookup -> Rewrite -> Expand -> Retrieve -> Chunk -> Rerank -> Grade
                   -> Chain (then grounding, once the answer's text is known: see Reply)
    /ai/summarize: Fetch -> Chunk -> Summarize

A stage says whether it is `wanted` for this request (rewriting is not, for one document by id)
and whether it `calls_llm` (skipped when the request's LLM call budget has only the answer's
call left); `run` does its work on the state. The last stage leaves the Reply in `state.reply`;
a stage that answers early (a cached answer) does the same, and the loop stops there.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar, Protocol, TypeVar

from service.cache import AnswerCache, CacheKey
from service.chains import (
    ChainResult,
    Chunk,
    MapReduceChain,
    NumberedChunk,
    PromptBuilder,
    PromptLibrary,
    QueryRewriter,
    Question,
    RefineChain,
    StuffChain,
    Summarizer,
    number_chunks,
    short_answer,
)
from service.chains.expand import QueryExpander
from service.chains.grade import RelevanceGrader
from service.chains.prompts import language_name
from service.chains.result import Prepared
from service.config.settings import (
    PromptSettings,
    RerankOrder,
    RetrievalSettings,
    SolrSettings,
)
from service.errors import (
    DocumentNotFound,
    EmptyDocument,
    IndexNotFound,
    NoDocumentFound,
    ServiceError,
    SummarySourceNotFound,
)
from service.grounding import GroundingPolicy
from service.grounding.claims import windows_of
from service.llm import ChatClient, ChatMessage, Usage
from service.llm.answer_format import AnswerFormat
from service.llm.rerank import RerankClient
from service.llm.size import RequestSize
from service.rag.reply import Reply, Timings, repeated
from service.rag.request import RagQuery, SummarizeQuery
from service.retrieval import (
    DocumentById,
    RetrievedDocument,
    Retriever,
    SolrClient,
    count_documents,
)
from service.retrieval.fusion import MultiQueryRetriever, blended
from service.retrieval.scope import EVERYTHING, Scope
from service.text import Chunker, sanitize_query

log = logging.getLogger(__name__)
MAX_WINDOWS = 100  # sentence windows scored a request (the local reranker's limit)
OFF_LOOP_CHARS = 50_000  # texts longer than this are cut into chunks in a worker thread


# -- the state a request's stages share -----------------------------------------------------------


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


# -- /ai/rag ---------------------------------------------------------------------------------


@dataclass
class CacheLookup(EveryRequest):
    """The answer cache: a question that means the same as one answered before, asked with
    the same `variant`, is answered again without any LLM call."""

    cache: AnswerCache
    variant: Callable[[RagQuery], str]
    llm: ChatClient
    name: ClassVar[str] = "cache"

    def wanted(self, state: RagState) -> bool:
        return not state.question.history

    async def run(self, state: RagState) -> None:
        found = await self.cache.lookup(state.question.text, self.variant(state.query))
        if found.hit is not None:
            state.reply = repeated(
                found.hit, self.llm, state.timings, state.started, state.query.options.form
            )
        else:
            state.cache_key = found.key


class WritesQueries:
    """A stage whose LLM call writes search queries: of no use when the request names its one
    document (`id`)."""

    calls_llm: ClassVar[bool] = True

    def wanted(self, state: RagState) -> bool:
        return state.query.document_id is None


@dataclass
class Rewrite(WritesQueries):
    """The LLM writes the search query from the question and the conversation."""

    llm: ChatClient
    prompts: PromptLibrary
    name: ClassVar[str] = "rewrite"

    async def run(self, state: RagState) -> None:
        rewrite = await QueryRewriter(self.llm, self.prompts).run(
            state.question.text, state.question.history
        )
        if rewrite.usage:
            state.usages.append(rewrite.usage)
        state.search_query = sanitize_query(rewrite.query) or state.search_query


@dataclass
class Expand(WritesQueries):
    """The LLM writes `count` search queries, searched at once and fused (multi-query)."""

    llm: ChatClient
    prompts: PromptLibrary
    count: int
    name: ClassVar[str] = "expand"

    async def run(self, state: RagState) -> None:
        question = state.question
        expansion = await QueryExpander(self.llm, self.prompts).run(
            state.search_query, question.text, question.history, count=self.count
        )
        if expansion.usage:
            state.usages.append(expansion.usage)
        state.queries = tuple(q for q in map(sanitize_query, expansion.queries) if q)


@dataclass
class Retrieve(EveryRequest):
    """BM25 documents, or passages (vector, hybrid); with `id`, that document only: whole with
    BM25, its best passages otherwise (whole when it has none). Several queries are searched
    at once and fused."""

    retrieval: RetrievalSettings
    layout: SolrSettings
    solr: SolrClient
    retriever: Callable[[Scope], Retriever]  # the configured retrieval within a scope
    name: ClassVar[str] = "retrieve"

    async def run(self, state: RagState) -> None:
        request = state.query
        scope = replace(request.scope, lang=request.lang)
        queries = state.queries or (state.search_query,)
        if request.document_id is not None:
            state.documents = await self._one(request.document_id, queries[0], scope)
        else:
            without_sources = request.options.answer_without_sources
            state.documents = await self._found(queries, scope, without_sources)

    async def _one(self, document_id: str, query: str, scope: Scope) -> list[RetrievedDocument]:
        document = await fetch(self.solr, self.layout, document_id, scope)
        if document is None:
            raise DocumentNotFound(
                f"no document with id {document_id!r} in FileShare, or not visible"
            )
        if self.retrieval.in_force == "bm25":
            return [document]
        return await self.retriever(scope.with_parent(document_id)).run(query) or [document]

    async def _found(
        self, queries: tuple[str, ...], scope: Scope, nothing_is_an_answer: bool
    ) -> list[RetrievedDocument]:
        retriever = self.retriever(scope)
        if len(queries) == 1:
            documents = await retriever.run(queries[0])
        else:
            fused = MultiQueryRetriever(
                retriever, k=self.retrieval.rrf_k, limit=self.retrieval.limit
            )
            documents = await fused.run(queries)
        if documents:
            return documents
        if scope.index is not None and not await count_documents(
            self.solr, self.layout.documents_collection, EVERYTHING.in_index(scope.index)
        ):
            raise IndexNotFound(scope.index)
        if nothing_is_an_answer:
            return []
        raise NoDocumentFound(
            f"the {self.retrieval.in_force} search found nothing for {queries[0]!r}"
        )


@dataclass
class ChunkDocuments(EveryRequest):
    """The documents cut into chunks of chunking.chunk.size (or whole, chunking off), each
    numbered by its document."""

    prompt: PromptSettings
    name: ClassVar[str] = "chunk"

    async def run(self, state: State) -> None:
        documents = state.documents
        if not self.prompt.chunking_enable:
            chunks = [Chunk(doc, doc.content) for doc in documents if doc.content.strip()]
        else:
            chunker = Chunker(self.prompt.chunk_size)

            def cut() -> list[Chunk]:
                return [Chunk(doc, text) for doc in documents for text in chunker.run(doc.content)]

            large = sum(len(doc.content) for doc in documents) > OFF_LOOP_CHARS
            chunks = await asyncio.to_thread(cut) if large else cut()  # the loop keeps serving
        state.chunks = number_chunks(chunks)
        if (error := state.without_text()) is not None:
            raise error


@dataclass
class Rerank(EveryRequest):
    """A rerank API scores the chunks against the question; the `top_n` best go on, best
    first (and numbered so), by its scores alone or (`order="blend"`) by its scores and
    retrieval's together. The retrieval order is kept when the API fails.

    With `min_score`, chunks the API scored below it are left out; none left is an abstention
    before any LLM call (NoDocumentFound, its reason the best score): the documents do not
    say it."""

    client: RerankClient
    top_n: int
    max_chunks: int
    min_score: float | None = None
    order: RerankOrder = "reranker"
    window: int = 0  # sentences: each chunk kept is cut to its best run of them (0: whole)
    name: ClassVar[str] = "rerank"

    def wanted(self, state: RagState) -> bool:
        one_is_enough = self.min_score is not None or self.window > 0
        return len(state.chunks) > 1 or (one_is_enough and bool(state.chunks))

    async def run(self, state: RagState) -> None:
        sent = state.chunks[: self.max_chunks]
        try:  # every chunk's score: a blend, and the minimum, need them all
            ranked = await self.client.rank(
                state.question.text, [item.chunk.text for item in sent], len(sent)
            )
        except ServiceError as error:
            log.warning("reranking skipped, the retrieval order kept: %s", error.reason)
            return
        order = [item.index for item in ranked]
        if self.order == "blend" and ranked:
            retrieval = [sent[i].chunk.document.score for i in order]
            order = [order[i] for i in blended(retrieval, [item.score for item in ranked])]
        scores = {item.index: item.score for item in ranked}
        kept = [i for i in order if self.min_score is None or scores[i] >= self.min_score]
        if ranked and not kept and not state.query.options.answer_without_sources:
            raise NoDocumentFound(
                f"not in the documents: the reranker scored the best of {len(sent)} passages "
                f"{ranked[0].score:.2f}, below rerank.min.score ({self.min_score:g})"
            )
        chosen = [sent[i].chunk for i in kept[: self.top_n]]
        if self.window:
            chosen = await self._windows(state.question.text, chosen)
        state.chunks = number_chunks(chosen)

    async def _windows(self, question: str, chunks: list[Chunk]) -> list[Chunk]:
        """Each chunk cut to its window of `window` sentences the API scores best: what the
        LLM reads is the evidence, not the passage around it. One request for every window
        (at most MAX_WINDOWS: the chunks past them stay whole); the chunks whole when it
        fails."""
        cuts: list[list[str]] = []
        counted = 0
        for chunk in chunks:
            found = windows_of(chunk.text, self.window)
            fits = counted + len(found) <= MAX_WINDOWS
            cuts.append(found if fits else [chunk.text])
            counted += len(cuts[-1])
        texts = [text for cut in cuts for text in cut]
        if len(texts) == len(chunks):
            return chunks  # none has more sentences than a window
        try:
            ranked = await self.client.rank(question, texts, len(texts))
        except ServiceError as error:
            log.warning("sentence windows skipped, the chunks kept whole: %s", error.reason)
            return chunks
        scores = {item.index: item.score for item in ranked}
        cut_chunks, first = [], 0
        for chunk, cut in zip(chunks, cuts, strict=True):
            best = max(range(len(cut)), key=lambda i: scores.get(first + i, -math.inf))
            cut_chunks.append(Chunk(chunk.document, cut[best]))
            first += len(cut)
        return cut_chunks


@dataclass
class Grade:
    """The LLM grades each chunk against the question; those below `minimum` are left out."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    minimum: str
    concurrency: int
    name: ClassVar[str] = "grade"
    calls_llm: ClassVar[bool] = True

    def wanted(self, state: RagState) -> bool:
        return bool(state.chunks)

    async def run(self, state: RagState) -> None:
        count = len(state.chunks)
        graded = await RelevanceGrader(
            self.llm,
            self.prompts,
            self.size,
            self.minimum,
            concurrency=self.concurrency,
            max_requests=self.llm.calls.left - 1,
        ).run(state.question.text, state.chunks)
        state.usages.extend(graded.usages)  # counted even when grading keeps nothing
        state.chunks = number_chunks([item.chunk for item in graded.kept])
        if not state.chunks and not state.query.options.answer_without_sources:
            raise NoDocumentFound(
                f"relevance grading found no chunk at {self.minimum} or above among {count}"
            )


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
    name: ClassVar[str] = "chain"

    async def run(self, state: RagState) -> None:
        chain_started = time.perf_counter()
        if state.chunks:
            builder = PromptBuilder(self.prompts, state.question)
            prepared = await self._chain(builder, state.chunks).prepare(state.chunks)
        else:  # nothing relevant, and the caller wants the LLM's answer without sources
            request = state.query
            conversation = [*state.question.history, ChatMessage("user", request.query)]
            prepared = Prepared(ChainResult(answer="", sources=[]), final=conversation)
        kept = None
        if self.cache is not None and state.cache_key is not None:
            kept = (self.cache, state.cache_key)  # where a new answer is kept
        state.reply = Reply(
            self.llm,
            prepared,
            state.timings,
            state.started,
            chain_started,
            tuple(state.usages),
            self._form(state.query, prepared),
            grounding=self.grounding,
            cache=kept,
        )

    def _form(self, query: RagQuery, prepared: Prepared) -> AnswerFormat:
        """The caller's form; the short answer's grammar added when it applies: a stuff
        request with sources, and no form the caller asked (a format, JSON, stops)."""
        form = query.options.form
        numbers = [source.number for source in prepared.result.sources]
        asked = query.format != "default" or form.json or form.stop
        if not self.short or self.strategy != "stuff" or not numbers or asked:
            return form
        return replace(form, grammar=short_answer.grammar(numbers))

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


# -- /ai/summarize ---------------------------------------------------------------------------


@dataclass
class Fetch(EveryRequest):
    """The document to summarize: by its FileShare id, or the text posted."""

    solr: SolrClient
    layout: SolrSettings
    name: ClassVar[str] = "retrieve"

    async def run(self, state: SummaryState) -> None:
        request = state.query
        if request.document_id is None:
            document = RetrievedDocument(id="", title="", url="", content=request.text or "")
        else:
            scope = replace(request.scope, lang=request.lang)
            found = await fetch(self.solr, self.layout, request.document_id, scope)
            if found is None:
                raise SummarySourceNotFound(
                    f"no document with id {request.document_id!r} in FileShare"
                )
            document = found
        state.documents = [document]


@dataclass
class Summarize(EveryRequest):
    """The summary chain (stuff, or map-reduce when the document does not fit one request)."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    concurrency: int
    answer_reserve: int
    name: ClassVar[str] = "chain"

    async def run(self, state: SummaryState) -> None:
        builder = PromptBuilder(
            self.prompts,
            Question(text="", language=language_name(state.query.lang)),
            system_template="summarize_system",
        )
        chain_started = time.perf_counter()
        summarizer = Summarizer(
            self.llm,
            builder,
            self.size,
            concurrency=self.concurrency,
            answer_reserve=self.answer_reserve,
        )
        prepared = await summarizer.prepare(state.chunks)
        state.reply = Reply(
            self.llm,
            prepared,
            state.timings,
            state.started,
            chain_started,
            sources_only_if_found=False,
        )


async def fetch(
    solr: SolrClient, layout: SolrSettings, document_id: str, scope: Scope
) -> RetrievedDocument | None:
    """One FileShare document by id, if the caller may see it."""
    found = DocumentById(solr, layout.documents_collection, layout.documents_map)
    return await found.run(document_id, scope)
