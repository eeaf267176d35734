"""One RAG request, start to end: the stages in order, each timed.

    validate -> [trim history] -> retrieve (BM25 | one document by id) -> chunk
             -> prompt chain -> answer + the documents it was given

The web layer builds a RagQuery and a RagPipeline per request (from the current settings) and
turns the RagAnswer, or the ServiceError raised here, into JSON.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from service.chains import Chunk, PromptBuilder, PromptLibrary, Question, Source, StuffChain
from service.chains.instructions import FORMAT_INSTRUCTIONS, language_name
from service.config import Settings
from service.errors import BadRequest, DocumentNotFound, FeatureDisabled, NoDocumentFound
from service.llm import ChatClient, ChatMessage
from service.retrieval import Bm25Retriever, DocumentById, RetrievedDocument, SolrClient
from service.text import Chunker, normalize_question, sanitize_query


@dataclass(frozen=True)
class RagQuery:
    """A validated /ai/rag request."""

    query: str
    document_id: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] = ()
    format: str = "default"


@dataclass(frozen=True)
class AnswerDocument:
    """A source listed with the answer: a document whose text the LLM was given."""

    id: str
    title: str
    url: str
    content: str
    number: int


@dataclass
class RagAnswer:
    message: str
    documents: list[AnswerDocument]
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Timings(dict[str, float]):
    """Milliseconds per stage."""

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self[name] = round((time.perf_counter() - started) * 1000, 1)


class RagPipeline:
    def __init__(
        self, settings: Settings, solr: SolrClient, llm: ChatClient, prompts: PromptLibrary
    ) -> None:
        self.settings = settings
        self._solr = solr
        self._llm = llm
        self._prompts = prompts

    async def run(self, request: RagQuery) -> RagAnswer:
        settings = self.settings
        if not settings.enable_rag:
            raise FeatureDisabled("ai.enable.rag is false in rag.properties")
        search_query = sanitize_query(request.query)
        if not search_query:
            raise BadRequest("the query is empty once sanitized")
        timings = Timings()
        with timings.stage("total"):
            with timings.stage("retrieve"):
                documents = await self._retrieve(search_query, request.document_id)
            chunks = self._chunk(documents)
            if not chunks:
                raise NoDocumentFound("the retrieved documents hold no text")
            question = Question(
                text=normalize_question(request.query),
                history=self._history(request.history),
                language=language_name(request.lang),
                format_instruction=FORMAT_INSTRUCTIONS[request.format],
            )
            builder = PromptBuilder(self._prompts, question)
            with timings.stage("chain"):
                result = await StuffChain(self._llm, builder, settings.max_request_size).run(chunks)
        return RagAnswer(
            message=result.answer,
            documents=[_answer_document(source) for source in result.sources],
            timings=dict(timings),
            llm_calls=result.llm_calls,
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
        )

    async def _retrieve(self, query: str, document_id: str | None) -> list[RetrievedDocument]:
        settings = self.settings
        if document_id is not None:
            document = await DocumentById(self._solr, settings.documents_collection).run(
                document_id
            )
            if document is None:
                raise DocumentNotFound(f"no document with id {document_id!r} in FileShare")
            return [document]
        documents = await Bm25Retriever(
            self._solr,
            settings.documents_collection,
            fields=settings.solr_bm25_fields,
            operator=settings.rag_operator,
            rows=settings.max_files,
        ).run(query)
        if not documents:
            raise NoDocumentFound(f"the BM25 search found no document for {query!r}")
        return documents

    def _chunk(self, documents: list[RetrievedDocument]) -> list[Chunk]:
        if not self.settings.chunking_enable:
            return [Chunk(doc, doc.content) for doc in documents if doc.content.strip()]
        chunker = Chunker(self.settings.chunk_size)
        return [Chunk(doc, text) for doc in documents for text in chunker.run(doc.content)]

    def _history(self, history: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
        if not self.settings.chat_memory_enabled or self.settings.history_size == 0:
            return ()
        return history[-self.settings.history_size :]


def _answer_document(source: Source) -> AnswerDocument:
    document = source.document
    return AnswerDocument(
        id=document.source_id,
        title=document.title,
        url=document.url,
        content="\n\n".join(source.snippets),
        number=source.number,
    )
