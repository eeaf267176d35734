"""Writing SourceDocuments into FileShare and their passages into VectorMain."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from service.config import Settings
from service.ingest.extract import SourceDocument
from service.ingest.passages import Passage, PassageSplitter
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.scope import MAIN_CORPUS
from service.retrieval.solr import SolrClient

Progress = Callable[[int, int], None]
LISTED_FIELDS = "id,title,url,language,last_modified,allowed_groups,denied_groups"


@dataclass(frozen=True)
class IngestSummary:
    """What an ingestion did."""

    documents: int
    passages: int
    seconds: float

    def __str__(self) -> str:
        rate = self.documents / self.seconds if self.seconds else 0.0
        return (
            f"{self.documents} documents and {self.passages} passages in {self.seconds:.1f}s "
            f"({rate:.1f} documents/s)"
        )


@dataclass(frozen=True)
class PassageIndex:
    """Where and how passages are written: the collection, the splitter, the embeddings."""

    collection: str
    splitter: PassageSplitter
    vector_field: str
    embeddings: EmbeddingsClient | None


class Indexer:
    """Adds documents to FileShare and replaces their passages in VectorMain, in batches.

    A document's old passages are deleted and its new ones added in the same update request,
    and nothing is visible before the final commit (the configsets open no searcher on their
    own), so a search never sees a mix of old and new passages, nor stale ones.

    >>> await Indexer(solr, "FileShare", passages=PassageIndex(...)).run(documents)
    """

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        *,
        passages: PassageIndex | None = None,
        batch_size: int = 50,
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._passages = passages
        self._batch_size = batch_size

    async def run(
        self, documents: Sequence[SourceDocument], progress: Progress | None = None
    ) -> IngestSummary:
        started = time.perf_counter()
        # the same id twice: the last version wins, passages included (ids are unique keys)
        documents = list({document.id: document for document in documents}.values())
        done = passages = 0
        for start in range(0, len(documents), self._batch_size):
            batch = documents[start : start + self._batch_size]
            await self._solr.add(self._collection, [doc.to_solr() for doc in batch])
            passages += await self._replace_passages(batch)
            done += len(batch)
            if progress:
                progress(done, len(documents))
        await self.commit()
        return IngestSummary(done, passages, time.perf_counter() - started)

    async def count(self, document_id: str | None = None) -> int:
        """Documents in FileShare: all of them, or those with this id (0 or 1)."""
        query = "*:*" if document_id is None else "{!term f=id}" + document_id
        found = await self._solr.select(
            self._collection, {"q": query, "defType": "lucene", "rows": 0}
        )
        return int(found["response"]["numFound"])

    async def page(
        self, *, limit: int, offset: int, filters: Sequence[str] = ()
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of FileShare's main corpus (not KAITO indexes), by id, with the `filters`
        (Solr filters the service built), and how many documents match."""
        found = await self._solr.select(
            self._collection,
            {"q": "*:*", "defType": "lucene", "fq": [MAIN_CORPUS, *filters], "sort": "id asc",
             "rows": limit, "start": offset, "fl": LISTED_FIELDS},
        )  # fmt: skip
        return list(found["response"]["docs"]), int(found["response"]["numFound"])

    async def delete(self, document_id: str) -> bool:
        """Removes a document and its passages; False when FileShare had no such document."""
        if not await self.count(document_id):
            return False
        await self.delete_all([document_id])
        return True

    async def delete_all(self, document_ids: Sequence[str]) -> None:
        """Removes these documents and their passages, in one update each and one commit."""
        await self._solr.update(self._collection, [("delete", {"id": i}) for i in document_ids])
        if self._passages:
            await self._solr.update(
                self._passages.collection, [("delete", _parent_query(i)) for i in document_ids]
            )
        await self.commit()

    async def delete_matching(self, query: str) -> None:
        """Removes the documents and the passages `query` (Lucene syntax, built by the
        service) matches."""
        await self._solr.update(self._collection, [("delete", {"query": query})])
        if self._passages:
            await self._solr.update(self._passages.collection, [("delete", {"query": query})])
        await self.commit()

    async def commit(self) -> None:
        await self._solr.commit(self._collection)
        if self._passages:
            await self._solr.commit(self._passages.collection)

    async def _replace_passages(self, batch: Sequence[SourceDocument]) -> int:
        index = self._passages
        if index is None:
            return 0
        passages: list[Passage] = [p for doc in batch for p in index.splitter.run(doc)]
        vectors: list[list[float] | None] = [None] * len(passages)
        if index.embeddings is not None and passages:
            vectors = list(await index.embeddings.embed([p.embedding_text for p in passages]))
        commands: list[tuple[str, object]] = [("delete", _parent_query(doc.id)) for doc in batch]
        commands += [
            ("add", {"doc": passage.to_solr(index.vector_field, vector)})
            for passage, vector in zip(passages, vectors, strict=True)
        ]
        await self._solr.update(index.collection, commands)
        return len(passages)


def indexer_for(settings: Settings, solr: SolrClient, embeddings: EmbeddingsClient) -> Indexer:
    """The indexer the settings describe: FileShare documents and embedded VectorMain passages."""
    layout, cutting = settings.solr, settings.embeddings
    return Indexer(
        solr,
        layout.documents_collection,
        passages=PassageIndex(
            collection=layout.passages_collection,
            splitter=PassageSplitter(cutting.passage_size, cutting.passage_overlap),
            vector_field=layout.vector_field,
            embeddings=embeddings,
        ),
    )


def _parent_query(document_id: str) -> dict[str, str]:
    # the term parser takes everything after its closing brace as the value, verbatim
    return {"query": "{!term f=parent_id}" + document_id}
