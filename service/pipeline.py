"""One request, start to end: the stages in order, each timed.

    /ai/rag:       validate -> [trim history] -> [rewrite the search query]
                   -> retrieve (BM25 | one document by id) -> chunk
                   -> chain (stuff | map-reduce | refine) -> answer + the documents it was given
    /ai/summarize: document (by id, or posted text) -> chunk -> summarize (stuff | map-reduce)

The web layer builds a query object and a pipeline per request (from the settings in force)
and turns the Answer, or the ServiceError raised here, into JSON.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

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
from service.chains.instructions import FORMAT_INSTRUCTIONS, language_name
from service.config import Settings
from service.config.settings import answer_reserve, request_budget
from service.errors import (
    BadRequest,
    DocumentNotFound,
    EmptyDocument,
    FeatureDisabled,
    NoDocumentFound,
)
from service.llm import ChatClient, ChatMessage, EmbeddingsClient, Usage
from service.retrieval import DocumentById, RetrievedDocument, SolrClient
from service.retrieval.factory import build_retriever
from service.text import Chunker, normalize_question, sanitize_query

_CITATION = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class RagQuery:
    """A validated /ai/rag request."""

    query: str
    document_id: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] = ()
    format: str = "default"


@dataclass(frozen=True)
class SummarizeQuery:
    """A validated /ai/summarize request: a FileShare id, or the text itself."""

    document_id: str | None = None
    text: str | None = None
    lang: str | None = None


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
    message: str
    documents: list[AnswerDocument]
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    search_query: str = ""

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
            self[name] = round((time.perf_counter() - started) * 1000, 1)


class _Pipeline:
    def __init__(
        self,
        settings: Settings,
        solr: SolrClient,
        llm: ChatClient,
        embeddings: EmbeddingsClient,
        prompts: PromptLibrary,
    ) -> None:
        self.settings = settings
        self._solr = solr
        self._llm = llm
        self._embeddings = embeddings
        self._prompts = prompts

    async def _document(self, document_id: str) -> RetrievedDocument | None:
        return await DocumentById(self._solr, self.settings.documents_collection).run(document_id)

    def _chunk(self, documents: list[RetrievedDocument]) -> list[NumberedChunk]:
        if not self.settings.chunking_enable:
            chunks = [Chunk(doc, doc.content) for doc in documents if doc.content.strip()]
        else:
            chunker = Chunker(self.settings.chunk_size)
            chunks = [Chunk(doc, text) for doc in documents for text in chunker.run(doc.content)]
        return number_chunks(chunks)


class RagPipeline(_Pipeline):
    async def run(self, request: RagQuery) -> Answer:
        settings = self.settings
        if not settings.enable_rag:
            raise FeatureDisabled("ai.enable.rag is false in rag.properties")
        search_query = sanitize_query(request.query)
        if not search_query:
            raise BadRequest("the query is empty once sanitized")
        question = Question(
            text=normalize_question(request.query),
            history=self._history(request.history),
            language=language_name(request.lang),
            format_instruction=FORMAT_INSTRUCTIONS[request.format],
        )
        timings = Timings()
        rewrite_usage: Usage | None = None
        with timings.stage("total"):
            if settings.query_rewriting_enabled and request.document_id is None:
                with timings.stage("rewrite"):
                    rewrite = await QueryRewriter(self._llm, self._prompts).run(
                        question.text, question.history
                    )
                rewrite_usage = rewrite.usage
                search_query = sanitize_query(rewrite.query) or search_query
            with timings.stage("retrieve"):
                documents = await self._retrieve(search_query, request.document_id)
            numbered = self._chunk(documents)
            if not numbered:
                raise NoDocumentFound("the retrieved documents hold no text")
            builder = PromptBuilder(self._prompts, question)
            with timings.stage("chain"):
                result = await self._chain(builder, numbered).run(numbered)
        answer = _answer(result, timings)
        answer.search_query = search_query
        if rewrite_usage is not None:
            answer.add_usage(rewrite_usage)
        return answer

    def _chain(
        self, builder: PromptBuilder, numbered: list[NumberedChunk]
    ) -> StuffChain | MapReduceChain | RefineChain:
        settings = self.settings
        budget = request_budget(settings)
        stuff = StuffChain(self._llm, builder, budget)
        if settings.chunking_strategy == "stuff" or stuff.fits_in_one_request(numbered):
            return stuff
        if settings.chunking_strategy == "mapreduce":
            return MapReduceChain(self._llm, builder, budget, concurrency=settings.map_concurrency)
        return RefineChain(self._llm, builder, budget, answer_reserve=answer_reserve(settings))

    async def _retrieve(self, query: str, document_id: str | None) -> list[RetrievedDocument]:
        """BM25 documents, or passages (vector, hybrid); with `id`, that document only: whole
        with BM25, its best passages otherwise (whole when it has none)."""
        settings = self.settings
        if document_id is not None:
            document = await self._document(document_id)
            if document is None:
                raise DocumentNotFound(f"no document with id {document_id!r} in FileShare")
            if settings.retrieval == "bm25":
                return [document]
            retriever = build_retriever(
                settings, self._solr, self._embeddings, parent_id=document_id
            )
            return await retriever.run(query) or [document]
        documents = await build_retriever(settings, self._solr, self._embeddings).run(query)
        if not documents:
            raise NoDocumentFound(f"the {settings.retrieval} search found nothing for {query!r}")
        return documents

    def _history(self, history: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
        if not self.settings.chat_memory_enabled or self.settings.history_size == 0:
            return ()
        return history[-self.settings.history_size :]


class SummarizePipeline(_Pipeline):
    async def run(self, request: SummarizeQuery) -> Answer:
        settings = self.settings
        if not settings.enable_summarization:
            raise FeatureDisabled("ai.enable.summarization is false in rag.properties")
        timings = Timings()
        with timings.stage("total"):
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
            with timings.stage("chain"):
                result = await Summarizer(
                    self._llm,
                    builder,
                    request_budget(settings),
                    concurrency=settings.map_concurrency,
                ).run(numbered)
        return _answer(result, timings)

    async def _source(self, request: SummarizeQuery) -> RetrievedDocument:
        if request.document_id is None:
            return RetrievedDocument(id="", title="", url="", content=request.text or "")
        document = await self._document(request.document_id)
        if document is None:
            raise NoDocumentFound(
                f"no document with id {request.document_id!r} in FileShare", status=404
            )
        return document


def _answer(result: ChainResult, timings: Timings) -> Answer:
    cited = {int(number) for number in _CITATION.findall(result.answer)}
    answer = Answer(
        message=result.answer,
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
    return answer
