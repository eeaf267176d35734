"""One request, start to end: the stages in order, each timed.

    /ai/rag:       validate -> [trim history] -> [answer cache: a hit is the answer]
                   -> [rewrite the search query]
                   -> [expand into several queries] -> retrieve (BM25 | kNN | hybrid, each
                   query at once, fused | one document by id) -> chunk -> [grade the chunks]
                   -> chain (stuff | map-reduce | refine) -> [check each sentence against its
                   sources: flag | drop | refuse] -> answer + the documents it was given
                   -> [kept in the answer cache]
    /ai/summarize: document (by id, or posted text) -> chunk -> summarize (stuff | map-reduce)

A router builds the query object and asks the runtime for a pipeline (the settings in force,
with the request's overrides); `pipeline.run(query)` is its one way in and returns a Reply:
everything up to the final LLM request is done, so errors come before any answer is sent. The
router awaits `reply.complete()` for the Answer, or iterates the reply for a stream, and turns
the Answer, or the ServiceError raised here, into JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from service.cache import AnswerCache, CachedAnswer, CachedDocument, CachedPayload, CacheKey
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
)
from service.chains.expand import QueryExpander
from service.chains.grade import RelevanceGrader
from service.chains.prompts import FORMAT_INSTRUCTIONS, language_name
from service.chains.result import Prepared, Source, says_nothing_relevant
from service.config import Settings
from service.deadline import Deadline
from service.errors import (
    BadRequest,
    DocumentNotFound,
    EmptyDocument,
    FeatureDisabled,
    IndexNotFound,
    NoDocumentFound,
    SummarySourceNotFound,
)
from service.grounding import Grounding, GroundingCheck, GroundingPolicy, LlmGroundingCheck
from service.llm import ChatClient, ChatMessage, EmbeddingsClient, Usage
from service.llm.answer_format import PLAIN, AnswerFormat
from service.llm.size import RequestSize, request_size
from service.metrics import observe_answer
from service.retrieval import (
    DocumentById,
    RetrievedDocument,
    Retriever,
    SolrClient,
    count_documents,
)
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.factory import build_retriever
from service.retrieval.fusion import MultiQueryRetriever
from service.retrieval.in_memory import InMemorySearch
from service.retrieval.scope import EVERYTHING, Scope
from service.text import Chunker, normalize_question, sanitize_query

_CITATION = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Overrides:
    """What one request may change of the settings for itself (the OpenAI endpoint: the
    retrieval its index names, KAITO's similarity threshold and dynamic top-k, its model,
    temperature, max_tokens and token budget)."""

    retrieval_method: str | None = None
    max_request_tokens: int | None = None
    similarity_min: float | None = None
    top_k: int | None = None
    strategy: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None

    def apply(self, settings: Settings) -> Settings:
        """`settings` with these changes, validated like rag.properties values."""
        keys = {
            "retrieval.method": self.retrieval_method,
            "prompt.max.request.tokens": self.max_request_tokens,
            "retrieval.similarity.min": self.similarity_min,
            "solr.topK": self.top_k,
            "prompt.chunking.strategy": self.strategy,
        }
        changes = {key: value for key, value in keys.items() if value is not None}
        return settings.overridden(changes) if changes else settings


NO_OVERRIDES = Overrides()


@dataclass(frozen=True)
class RagQuery:
    """A validated RAG request, from /ai/rag or /v1/chat/completions."""

    query: str
    document_id: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] = ()
    format: str = "default"
    # the OpenAI-compatible endpoint's messages are the conversation itself: always used
    always_use_history: bool = False
    # what the caller may see (security on); the default searches everything
    scope: Scope = EVERYTHING
    overrides: Overrides = NO_OVERRIDES
    # the answer's stop sequences and response format (the OpenAI endpoint's)
    form: AnswerFormat = PLAIN
    # nothing relevant found: an error (Datafari's 428), or the LLM answers the conversation
    # without sources (KAITO's rule, openai.no.context=answer)
    answer_without_sources: bool = False


@dataclass(frozen=True)
class SummarizeQuery:
    """A validated /ai/summarize request: a FileShare id, or the text itself."""

    document_id: str | None = None
    text: str | None = None
    lang: str | None = None
    scope: Scope = EVERYTHING


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
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "length" when max_tokens cut the answer
    grounding: Grounding | None = None  # each sentence checked (grounding.enabled)
    cache_age: float | None = None  # seconds, when the answer came from the answer cache

    def add_usage(self, usage: Usage) -> None:
        self.llm_calls += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens


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
    # the answer cache: the entry this reply repeats, or where its answer is to be kept
    cached: CachedAnswer | None = None
    cache: tuple[AnswerCache, CacheKey] | None = None

    async def complete(self) -> Answer:
        async for _ in self._texts(stream=False):
            pass
        return await self.answer()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._texts(stream=True)

    async def _texts(self, *, stream: bool) -> AsyncIterator[str]:
        stream = stream and not self.form.json
        texts = self.prepared.finish(self.llm, stream=stream, form=self.form)
        async for text in self.deadline.stream(texts):
            yield text
            # pieces already buffered would otherwise be sent in one go, without the event
            # loop ever running: a client that left is then written to thousands of times,
            # and the LLM stream goes on, before its disconnect is noticed
            await asyncio.sleep(0)

    async def answer(self) -> Answer:
        """The Answer once its text is known: checked against its sources (grounding on),
        which may change it (drop) or refuse it (NoValidAnswer)."""
        self.timings.since("chain", self.chain_started)
        result = self.prepared.result
        cited = _cited(result.answer)
        found_nothing = not cited and says_nothing_relevant(result.answer)
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
        if self.sources_only_if_found and found_nothing:
            answer.documents = []
        for usage in (*self.extra_usage, *(grounded.usages if grounded else ())):
            answer.add_usage(usage)
        answer.grounding = grounded.grounding if grounded else None
        await self._cached_or_kept(answer)
        observe_answer(
            answer.timings,
            llm_calls=answer.llm_calls,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
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


Q = TypeVar("Q", RagQuery, SummarizeQuery)


class _Pipeline(Generic[Q]):
    def __init__(
        self,
        settings: Settings,
        solr: SolrClient,
        llm: ChatClient,
        embeddings: EmbeddingsClient,
        prompts: PromptLibrary,
        answer_cache: AnswerCache | None = None,
        embedding_mode: EmbeddingMode | None = None,
        in_memory: InMemorySearch | None = None,
    ) -> None:
        self.settings = settings
        self._in_memory = in_memory  # rag.enable.vector.search
        self._solr = solr
        self._llm = llm
        self._embeddings = embeddings
        self._prompts = prompts
        self._answer_cache = answer_cache
        self._embedding_mode = embedding_mode  # None: the service embeds questions

    @property
    def model(self) -> str:
        """The model the answers come from (the request's, or llm.model)."""
        return self._llm.options.model

    @property
    def _size(self) -> RequestSize:
        """How big each LLM request may be, its tokens counted as this model counts them."""
        return request_size(self.settings, self.model)

    @property
    def _answer_reserve(self) -> int:
        """Room kept for an earlier answer carried into a request (refine, reduce): llm.maxTokens
        tokens."""
        return self._size.of_answer(self.settings.llm.max_tokens)

    async def run(self, request: Q) -> Reply:
        """The request's one way in: everything up to the final LLM request, within the
        request's deadline, which the returned Reply keeps for that last request. Errors found
        here (bad input, nothing found, Solr down) come before any answer is sent."""
        deadline = Deadline(self.settings.server.request_timeout)
        staged = await deadline.run(self._prepare(request))
        staged.deadline = deadline
        return staged

    async def _prepare(self, request: Q) -> Reply:
        raise NotImplementedError

    async def _document(self, document_id: str, scope: Scope) -> RetrievedDocument | None:
        layout = self.settings.solr
        found = DocumentById(self._solr, layout.documents_collection, layout.documents_map)
        return await found.run(document_id, scope)

    def _chunk(self, documents: list[RetrievedDocument]) -> list[NumberedChunk]:
        if not self.settings.prompt.chunking_enable:
            chunks = [Chunk(doc, doc.content) for doc in documents if doc.content.strip()]
        else:
            chunker = Chunker(self.settings.prompt.chunk_size)
            chunks = [Chunk(doc, text) for doc in documents for text in chunker.run(doc.content)]
        return number_chunks(chunks)


class RagPipeline(_Pipeline[RagQuery]):
    """/ai/rag and /v1/chat/completions: retrieve, chunk, grade, then a chain."""

    async def _prepare(self, request: RagQuery) -> Reply:
        """Validation, rewriting, retrieval, chunking and the chain's intermediate requests:
        errors found here come before any answer."""
        settings = self.settings
        if not settings.server.enable_rag:
            raise FeatureDisabled("ai.enable.rag is false in rag.properties")
        search_query = sanitize_query(request.query)
        if not search_query:
            raise BadRequest("the query is empty once sanitized")
        question = Question(
            text=normalize_question(request.query),
            history=self._history(request),
            language=language_name(request.lang),
            format_instruction=FORMAT_INSTRUCTIONS[request.format],
        )
        started = time.perf_counter()
        timings = Timings()
        cache_key = None
        if self._answer_cache is not None and not question.history:
            with timings.stage("cache"):
                found = await self._answer_cache.lookup(question.text, self._variant(request))
            if found.hit is not None:
                return _repeated(found.hit, self._llm, timings, started, request.form)
            cache_key = found.key
        extra_usage: tuple[Usage, ...] = ()
        calls = self._llm.calls  # the request's LLM call budget: one is kept for the answer
        if settings.chat.rewriting_enabled and request.document_id is None and calls.left > 1:
            with timings.stage("rewrite"):
                rewrite = await QueryRewriter(self._llm, self._prompts).run(
                    question.text, question.history
                )
            extra_usage = (rewrite.usage,) if rewrite.usage else ()
            search_query = sanitize_query(rewrite.query) or search_query
        queries = (search_query,)
        if settings.retrieval.queries_count > 1 and request.document_id is None and calls.left > 1:
            with timings.stage("expand"):
                expansion = await QueryExpander(self._llm, self._prompts).run(
                    search_query,
                    question.text,
                    question.history,
                    count=settings.retrieval.queries_count,
                )
            extra_usage += (expansion.usage,) if expansion.usage else ()
            queries = tuple(q for q in map(sanitize_query, expansion.queries) if q)
        with timings.stage("retrieve"):
            documents = await self._retrieve(
                queries,
                request.document_id,
                replace(request.scope, lang=request.lang),
                request.answer_without_sources,
            )
        numbered = self._chunk(documents)
        if documents and not numbered and not request.answer_without_sources:
            raise NoDocumentFound("the retrieved documents hold no text")
        if numbered and settings.retrieval.grading_enabled and calls.left > 1:
            chunks = len(numbered)
            numbered, grading = await self._graded(question, numbered, timings)
            extra_usage += grading  # counted even when grading keeps nothing
            if not numbered and not request.answer_without_sources:
                raise NoDocumentFound(
                    f"relevance grading found no chunk at {settings.retrieval.grading_min} or "
                    f"above among {chunks}"
                )
        chain_started = time.perf_counter()
        if numbered:
            builder = PromptBuilder(self._prompts, question)
            prepared = await self._chain(builder, numbered).prepare(numbered)
        else:  # nothing relevant, and the caller wants the LLM's answer without sources
            conversation = [*question.history, ChatMessage("user", request.query)]
            prepared = Prepared(ChainResult(answer="", sources=[]), final=conversation)
        return Reply(
            self._llm,
            prepared,
            timings,
            started,
            chain_started,
            extra_usage,
            request.form,
            grounding=self._grounding_policy(),
            cache=(self._answer_cache, cache_key) if self._answer_cache and cache_key else None,
        )

    def _variant(self, request: RagQuery) -> str:
        """Everything but the question that shapes an answer, hashed: the settings in force,
        the prompts, the model, the caller's groups, id, lang, format and the request's
        overrides and answer form. Two requests share cached answers only when it is equal."""
        scope = request.scope
        if scope.groups is not None:
            scope = replace(scope, groups=tuple(sorted(scope.groups)))
        asked = replace(request, query="", history=(), scope=scope)
        parts = (self.settings.version(), self._prompts.fingerprint, self.model, repr(asked))
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

    def _grounding_policy(self) -> GroundingPolicy | None:
        """How the answer is checked against its sources, or None (grounding.enabled off)."""
        grounding = self.settings.grounding
        if not grounding.enabled:
            return None
        check = GroundingCheck(
            None if grounding.method == "words" else self._embeddings,
            min_overlap=grounding.min_overlap,
            min_similarity=grounding.min_similarity,
        )
        checker: GroundingCheck | LlmGroundingCheck = check
        if grounding.method == "llm":
            checker = LlmGroundingCheck(
                self._llm,
                self._prompts,
                self._size,
                check,
                concurrency=self.settings.prompt.map_concurrency,
            )
        return GroundingPolicy(checker, grounding.action, grounding.min_ratio)

    async def _graded(
        self, question: Question, numbered: list[NumberedChunk], timings: Timings
    ) -> tuple[list[NumberedChunk], tuple[Usage, ...]]:
        """The chunks the LLM grades relevant (none, maybe), and what grading cost."""
        settings = self.settings
        with timings.stage("grade"):
            graded = await RelevanceGrader(
                self._llm,
                self._prompts,
                self._size,
                settings.retrieval.grading_min,
                concurrency=settings.prompt.map_concurrency,
                max_requests=self._llm.calls.left - 1,
            ).run(question.text, numbered)
        return number_chunks([item.chunk for item in graded.kept]), tuple(graded.usages)

    def _chain(
        self, builder: PromptBuilder, numbered: list[NumberedChunk]
    ) -> StuffChain | MapReduceChain | RefineChain:
        settings = self.settings
        budget = self._size  # counted once: it may load the model's tokenizer
        stuff = StuffChain(self._llm, builder, budget)
        if settings.prompt.strategy == "stuff" or stuff.fits_in_one_request(numbered):
            return stuff
        if settings.prompt.strategy == "mapreduce":
            return MapReduceChain(
                self._llm,
                builder,
                budget,
                concurrency=settings.prompt.map_concurrency,
                answer_reserve=self._answer_reserve,
            )
        return RefineChain(self._llm, builder, budget, answer_reserve=self._answer_reserve)

    def _retriever(self, scope: Scope) -> Retriever:
        """The configured retrieval within `scope`, the question embedded as configured."""
        settings = self.settings
        return build_retriever(
            settings.retrieval,
            settings.solr,
            self._solr,
            self._embeddings,
            scope=scope,
            mode=self._embedding_mode,
            in_memory=self._in_memory,
        )

    async def _retrieve(
        self,
        queries: tuple[str, ...],
        document_id: str | None,
        scope: Scope,
        nothing_is_an_answer: bool = False,
    ) -> list[RetrievedDocument]:
        """BM25 documents, or passages (vector, hybrid); with `id`, that document only: whole
        with BM25, its best passages otherwise (whole when it has none). Several queries are
        searched at once and fused."""
        settings = self.settings
        query = queries[0]
        if document_id is not None:
            document = await self._document(document_id, scope)
            if document is None:
                raise DocumentNotFound(
                    f"no document with id {document_id!r} in FileShare, or not visible"
                )
            if settings.retrieval.in_force == "bm25":
                return [document]
            retriever = self._retriever(scope.with_parent(document_id))
            return await retriever.run(query) or [document]
        retriever = self._retriever(scope)
        if len(queries) == 1:
            documents = await retriever.run(query)
        else:
            fused = MultiQueryRetriever(
                retriever, k=settings.retrieval.rrf_k, limit=settings.retrieval.limit
            )
            documents = await fused.run(queries)
        if not documents:
            if scope.index is not None and not await count_documents(
                self._solr, settings.solr.documents_collection, EVERYTHING.in_index(scope.index)
            ):
                raise IndexNotFound(scope.index)
            if nothing_is_an_answer:
                return []
            raise NoDocumentFound(
                f"the {settings.retrieval.in_force} search found nothing for {query!r}"
            )
        return documents

    def _history(self, request: RagQuery) -> tuple[ChatMessage, ...]:
        if request.always_use_history:
            return request.history
        if not self.settings.chat.memory_enabled or self.settings.chat.history_size == 0:
            return ()
        return request.history[-self.settings.chat.history_size :]


class SummarizePipeline(_Pipeline[SummarizeQuery]):
    """/ai/summarize: one document (or text), stuffed or map-reduced."""

    async def _prepare(self, request: SummarizeQuery) -> Reply:
        settings = self.settings
        if not settings.server.enable_summarization:
            raise FeatureDisabled("ai.enable.summarization is false in rag.properties")
        started = time.perf_counter()
        timings = Timings()
        with timings.stage("retrieve"):
            document = await self._source(request)
        numbered = self._chunk([document])
        if not numbered:
            raise EmptyDocument(f"document {document.id!r} has no text to summarize")
        builder = PromptBuilder(
            self._prompts,
            Question(text="", language=language_name(request.lang)),
            system_template="summarize_system",
        )
        chain_started = time.perf_counter()
        summarizer = Summarizer(
            self._llm,
            builder,
            self._size,
            concurrency=settings.prompt.map_concurrency,
            answer_reserve=self._answer_reserve,
        )
        prepared = await summarizer.prepare(numbered)
        return Reply(
            self._llm, prepared, timings, started, chain_started, sources_only_if_found=False
        )

    async def _source(self, request: SummarizeQuery) -> RetrievedDocument:
        if request.document_id is None:
            return RetrievedDocument(id="", title="", url="", content=request.text or "")
        document = await self._document(
            request.document_id, replace(request.scope, lang=request.lang)
        )
        if document is None:
            raise SummarySourceNotFound(f"no document with id {request.document_id!r} in FileShare")
        return document


def _cited(answer: str) -> set[int]:
    return {int(number) for number in _CITATION.findall(answer)}


def _source_texts(result: ChainResult) -> list[tuple[int, str]]:
    """What each source sent to the LLM said, under its number: what grounding checks."""
    return [(source.number, text) for source in result.sources for text in source.snippets]


def _answer(result: ChainResult, message: str, timings: Timings) -> Answer:
    cited = _cited(message)
    answer = Answer(
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
    )
    answer.llm_calls = result.llm_calls
    answer.prompt_tokens = result.usage.prompt_tokens
    answer.completion_tokens = result.usage.completion_tokens
    answer.finish_reason = result.finish_reason
    return answer


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


def _repeated(
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
