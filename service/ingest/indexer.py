"""Writing SourceDocuments into FileShare, in batches, with progress."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.ingest.extract import SourceDocument
from service.retrieval.solr import SolrClient

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class IngestSummary:
    """What an ingestion did."""

    documents: int
    seconds: float

    def __str__(self) -> str:
        rate = self.documents / self.seconds if self.seconds else 0.0
        return f"{self.documents} documents in {self.seconds:.1f}s ({rate:.0f}/s)"


class Indexer:
    """Adds documents to the documents collection, `batch_size` per update, then commits."""

    def __init__(self, solr: SolrClient, collection: str, *, batch_size: int = 100) -> None:
        self._solr = solr
        self._collection = collection
        self._batch_size = batch_size

    async def run(
        self, documents: Sequence[SourceDocument], progress: Progress | None = None
    ) -> IngestSummary:
        started = time.perf_counter()
        done = 0
        for start in range(0, len(documents), self._batch_size):
            batch = documents[start : start + self._batch_size]
            await self._solr.add(self._collection, [doc.to_solr() for doc in batch])
            done += len(batch)
            if progress:
                progress(done, len(documents))
        await self._solr.commit(self._collection)
        return IngestSummary(done, time.perf_counter() - started)

    async def delete(self, document_id: str) -> None:
        await self._solr.delete_by_query(self._collection, "{!term f=id}" + document_id)
