"""Retrieve: the documents or passages that may answer, from Solr (or one document by id)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

from service.config.settings import (
    RetrievalSettings,
    SolrSettings,
)
from service.errors import (
    DocumentNotFound,
    IndexNotFound,
    NoDocumentFound,
)
from service.rag.stages.fetch import fetch
from service.rag.stages.state import Documents, EveryRequest, RagState
from service.retrieval import (
    RetrievedDocument,
    Retriever,
    SolrClient,
    count_documents,
)
from service.retrieval.fusion import MultiQueryRetriever
from service.retrieval.scope import EVERYTHING, Scope


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

    async def run(self, state: RagState) -> Documents:
        request = state.query
        scope = replace(request.scope, lang=request.lang)
        queries = state.queries or (state.search_query,)
        if request.document_id is not None:
            return Documents(await self._one(request.document_id, queries[0], scope))
        without_sources = request.options.answer_without_sources
        return Documents(await self._found(queries, scope, without_sources))

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
        if scope.partition is not None and not await count_documents(
            self.solr, self.layout.documents_collection, EVERYTHING.in_partition(scope.partition)
        ):
            raise IndexNotFound(scope.partition)
        if nothing_is_an_answer:
            return []
        raise NoDocumentFound(
            f"the {self.retrieval.in_force} search found nothing for {queries[0]!r}"
        )


@dataclass
class Given(EveryRequest):
    """The documents an earlier step found (an agent's tools), in Retrieve's place: the answer
    is written, checked and refused from them as from Retrieve's."""

    documents: tuple[RetrievedDocument, ...]
    name: ClassVar[str] = "gathered"

    async def run(self, state: RagState) -> Documents:
        return Documents(list(self.documents))
