"""Datafari 7's search action: the documents that match the question, one a document, no
answer written (no LLM)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from service.config.settings import SecuritySettings
from service.rag.reply import Answer, AnswerDocument
from service.retrieval import Scope
from service.retrieval.base import RetrievedDocument
from service.snapshot import Snapshot
from service.text.sanitize import sanitize_query

SEARCH_RESULTS = 5  # Datafari's search action lists this many documents
SEARCH_DEPTH = 3  # passages read for each document it lists (several may be one document's)
MAX_DEPTH = 100  # Datafari's search API: start + rows at most (the most one search reads)


async def search(
    snapshot: Snapshot, scope: Scope, query: str, progress: Callable[[str], None] | None
) -> Answer:
    """The documents that match `query` within `scope`, as an Answer without a message; the
    query is Solr's as every route's is (sanitize_query: no syntax, 500 characters: 19,000
    "(" made Solr's parser overflow its stack)."""
    if progress:
        progress("search")
    started = time.perf_counter()
    query = sanitize_query(query)
    if not query:
        return Answer(message="", documents=[], timings={"search": 0.0})
    # passages (hybrid, vector) are read by their documents: one result a document
    retriever = snapshot.index_retriever(scope, SEARCH_RESULTS * SEARCH_DEPTH)
    first: dict[str, RetrievedDocument] = {}
    for found in await retriever.run(query):
        first.setdefault(found.source_id, found)  # a document's best passage
    listed = list(first.values())[:SEARCH_RESULTS]
    documents = [
        AnswerDocument(d.source_id, d.title, d.url, d.content, number, cited=False)
        for number, d in enumerate(listed, start=1)
    ]
    took = round((time.perf_counter() - started) * 1000, 1)
    return Answer(message="", documents=documents, timings={"search": took})


async def documents_found(
    snapshot: Snapshot,
    scope: Scope,
    words: str,
    count: int,
    operator: str,
    filters: Sequence[str],
) -> tuple[list[RetrievedDocument], int]:
    """Datafari's search API: the first `count` documents BM25 finds for `words` (`operator`
    AND or OR between them) within `scope` and the filters (a facet's), and how many it
    matches in all."""
    if not words:
        return [], 0
    scope = await snapshot.narrowed(scope, None, filters)
    depth = min(MAX_DEPTH, max(count, 1))  # rows=0 counts: one is read
    retriever = snapshot.index_retriever(scope, depth, "bm25", operator=operator)
    found = (await retriever.run(words))[:count]
    matched = getattr(retriever, "matched", None)
    return found, matched if isinstance(matched, int) else len(found)


def shown_score(score: float, rank: int, security: SecuritySettings) -> float:
    """The score a caller is shown of the document found at `rank` (1: the first). BM25
    counts every document of the collection, hidden ones too: with document-level security
    on, a word's raw score would tell whether documents the caller may not see hold it, so
    the caller is shown 1/rank instead, unless security.scores.exposed takes the risk."""
    if security.enabled and not security.scores_exposed:
        return round(1 / max(rank, 1), 6)
    return round(score, 6)
