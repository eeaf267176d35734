"""Several search queries for one question, searched at the same time and fused.

Every query goes to the configured retriever (BM25, kNN or hybrid) concurrently; the rankings
are fused by reciprocal rank, and a passage found by several queries counts once, as does text
found under two ids (Datafari's dedupe of embedded content: same normalized text, same hash).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence

from service.retrieval.base import RetrievedDocument, Retriever
from service.retrieval.hybrid import reciprocal_rank_fusion

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
