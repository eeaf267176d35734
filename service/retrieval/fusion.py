"""Fusing rankings by reciprocal rank: hybrid retrieval (BM25 and kNN of one query) and
multi-query retrieval (several queries at once), with duplicates removed."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace

from service.retrieval.base import RetrievedDocument, Retriever

# -- hybrid: BM25 and kNN of one query -------------------------------------------------------------


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[float, Sequence[RetrievedDocument]]], *, k: int, limit: int
) -> list[RetrievedDocument]:
    """Each ranking (weight, documents best first) gives a document weight / (k + rank), rank
    counted from 1; documents are sorted by the sum, ties kept in order of first appearance.
    The fused score replaces each document's own."""
    scores: dict[str, float] = {}
    first_seen: dict[str, RetrievedDocument] = {}
    for weight, documents in rankings:
        for rank, document in enumerate(documents, start=1):
            scores[document.id] = scores.get(document.id, 0.0) + weight / (k + rank)
            first_seen.setdefault(document.id, document)
    order = sorted(first_seen, key=lambda doc_id: -scores[doc_id])  # stable: ties keep order
    return [replace(first_seen[doc_id], score=scores[doc_id]) for doc_id in order[:limit]]


class HybridRetriever:
    """Runs the BM25 and the kNN retrievers at the same time and fuses their rankings."""

    def __init__(
        self,
        lexical: Retriever,
        semantic: Retriever,
        *,
        k: int = 60,
        lexical_weight: float = 1.0,
        semantic_weight: float = 1.0,
        limit: int = 10,
    ) -> None:
        self._lexical = lexical
        self._semantic = semantic
        self._k = k
        self._weights = (lexical_weight, semantic_weight)
        self._limit = limit

    async def run(self, query: str) -> list[RetrievedDocument]:
        lexical, semantic = await asyncio.gather(
            self._lexical.run(query), self._semantic.run(query)
        )
        return reciprocal_rank_fusion(
            [(self._weights[0], lexical), (self._weights[1], semantic)],
            k=self._k,
            limit=self._limit,
        )


# -- multi-query: several queries at once ----------------------------------------------------------

_SPACE = re.compile(r"\s+")


def content_key(document: RetrievedDocument) -> str:
    """The same text, whatever its spacing or case, gives the same key."""
    normalized = _SPACE.sub(" ", document.content).strip().casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def without_duplicate_content(documents: Sequence[RetrievedDocument]) -> list[RetrievedDocument]:
    seen: set[str] = set()
    kept = []
    for document in documents:
        key = content_key(document)
        if key not in seen:
            seen.add(key)
            kept.append(document)
    return kept


class MultiQueryRetriever:
    """>>> documents = await MultiQueryRetriever(retriever, k=60, limit=10).run(queries)"""

    def __init__(self, retriever: Retriever, *, k: int, limit: int) -> None:
        self._retriever = retriever
        self._k = k
        self._limit = limit

    async def run(self, queries: Sequence[str]) -> list[RetrievedDocument]:
        rankings = await asyncio.gather(*(self._retriever.run(query) for query in queries))
        fused = reciprocal_rank_fusion(
            [(1.0, ranking) for ranking in rankings], k=self._k, limit=len(queries) * self._limit
        )
        return without_duplicate_content(fused)[: self._limit]
