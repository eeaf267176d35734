"""Datafari's InMemory vector search: BM25's documents cut into passages, ranked by meaning.

The one vector search that needs no passages collection (`rag.enable.vector.search`): the
documents BM25 found are split as ingestion splits them (by paragraph, then recursively,
`vector.chunk.size` / `vector.chunk.overlap`), each passage is embedded (its title with it, as
ingestion embeds), the question too, and the `inMemory.maxChunks` passages nearest the
question are what the LLM is given. Passage vectors are kept in a bounded LRU, so a popular
document is not embedded again; one request embeds at most MAX_CHUNKS passages.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from service.errors import UpstreamBadResponse
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.base import RetrievedDocument, Retriever
from service.text.chunk import Chunker

MAX_CHUNKS = 256  # passages one request may rank (and so embed, when none is cached)
MAX_VECTORS = 20_000  # passage vectors kept (384 float32: 1.5 KiB each, ~30 MiB)


class PassageVectors:
    """Passage vectors by embeddings model and text, the least recently used dropped first."""

    def __init__(self, capacity: int = MAX_VECTORS) -> None:
        self._capacity = capacity
        self._held: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.embedded = 0  # texts sent to the embeddings API, in all

    async def of(self, embeddings: EmbeddingsClient, texts: Sequence[str]) -> np.ndarray:
        """The texts' unit vectors, one row each; only those not held are embedded."""
        model = embeddings.options.model
        keys = [hashlib.sha256(f"{model}\0{text}".encode()).digest() for text in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._held))
        if missing:
            first = {key: i for i, key in reversed(list(enumerate(keys)))}
            vectors = await embeddings.embed([texts[first[key]] for key in missing])
            self.embedded += len(missing)
            for key, vector in zip(missing, vectors, strict=True):
                self._keep(key, _unit(vector))
        rows = []
        for key in keys:
            self._held.move_to_end(key)
            rows.append(self._held[key])
        return np.vstack(rows)

    def _keep(self, key: bytes, vector: np.ndarray) -> None:
        self._held[key] = vector
        while len(self._held) > self._capacity:
            self._held.popitem(last=False)


@dataclass(frozen=True)
class InMemorySearch:
    """InMemory vector search as configured: where vectors are kept, how passages are cut,
    how many are kept."""

    vectors: PassageVectors
    size: int
    overlap: int
    max_chunks: int

    def around(self, documents: Retriever, embeddings: EmbeddingsClient) -> Retriever:
        return InMemoryVectorRetriever(
            documents,
            embeddings,
            self.vectors,
            size=self.size,
            overlap=self.overlap,
            max_chunks=self.max_chunks,
        )


class InMemoryVectorRetriever:
    """The `max_chunks` passages of `documents`' results nearest the question."""

    def __init__(
        self,
        documents: Retriever,
        embeddings: EmbeddingsClient,
        vectors: PassageVectors,
        *,
        size: int,
        overlap: int,
        max_chunks: int,
    ) -> None:
        self._documents = documents
        self._embeddings = embeddings
        self._vectors = vectors
        self._chunker = Chunker(size, overlap)
        self._max_chunks = max_chunks

    async def run(self, query: str) -> list[RetrievedDocument]:
        found = await self._documents.run(query)
        passages = await asyncio.to_thread(self._passages, found)  # the loop keeps serving
        if not passages:
            return found  # no text to rank: the pipeline says so
        texts = [f"{p.title}\n{p.content}" if p.title else p.content for p in passages]
        matrix = await self._vectors.of(self._embeddings, texts)
        (question,) = await self._embeddings.embed([query], kind="query")
        if not question:
            raise UpstreamBadResponse("the embeddings API returned an empty vector")
        similarity = matrix @ _unit(question)
        order = np.argsort(-similarity, kind="stable")[: self._max_chunks]
        return [replace(passages[i], score=float(similarity[i])) for i in order]

    def _passages(self, documents: list[RetrievedDocument]) -> list[RetrievedDocument]:
        """Each document's passages, its first MAX_CHUNKS / len(documents) at most."""
        each = max(1, MAX_CHUNKS // max(1, len(documents)))
        passages = []
        for document in documents:
            # the first `each` passages lie within this much of the text: no more is cut
            read = document.content[: (each + 1) * self._chunker.size]
            texts = self._chunker.run(read)[:each]
            passages += [
                RetrievedDocument(
                    id=f"{document.id}_{index}",
                    title=document.title,
                    url=document.url,
                    content=text,
                    parent_id=document.id,
                )
                for index, text in enumerate(texts)
            ]
        return passages[:MAX_CHUNKS]


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array
