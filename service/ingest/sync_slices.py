"""`solr-rag sync`'s writes (service.ingest.sync): a page's passages, SLICE at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.ingest.indexer import EMBEDDING_HASH
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.solr import SolrClient

SLICE = 256  # passages embedded, written and committed together


class SliceWriter:
    """A page's passages written SLICE at a time, each slice embedded (but for the vectors
    Solr already holds), written and committed, and its progress said: a document of
    thousands of passages shows its progress, and a run that stops midway keeps what it
    wrote (the next one reuses those vectors)."""

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        embeddings: EmbeddingsClient,
        fields: tuple[str, str],
        known: dict[str, list[float]],
        said: Callable[[int, int], None],
    ) -> None:
        self._solr, self._collection, self._embeddings = solr, collection, embeddings
        self._parent, self._vector = fields  # the passages' parent and vector fields
        self._known = known
        self._said = said
        self._commands: list[tuple[str, object]] = []
        self._passages: list[tuple[dict[str, Any], str]] = []
        self.written = 0
        self.embedded = 0

    def delete(self, parent: str) -> None:
        self._commands.append(("delete", {"query": f"{{!term f={self._parent}}}{parent}"}))

    async def add(self, passage: dict[str, Any], embedded_text: str) -> None:
        self._passages.append((passage, embedded_text))
        if len(self._passages) >= SLICE:
            await self.flush(commit=True)

    async def flush(self, *, commit: bool = False) -> None:
        missing = [
            i for i, (p, _) in enumerate(self._passages) if p[EMBEDDING_HASH] not in self._known
        ]
        texts = [self._passages[i][1] for i in missing]
        vectors = await self._embeddings.embed(texts) if texts else []
        fresh = dict(zip(missing, vectors, strict=True))
        for i, (passage, _) in enumerate(self._passages):
            passage[self._vector] = fresh.get(i) or self._known[passage[EMBEDDING_HASH]]
        commands = self._commands + [("add", {"doc": p}) for p, _ in self._passages]
        if commands:
            await self._solr.update(self._collection, commands, commit=commit)
        self.written += len(self._passages)
        self.embedded += len(missing)
        self._commands, self._passages = [], []
        if commit:  # a slice within the page (the page's end is said once it is committed)
            self._said(self.written, self.embedded)
