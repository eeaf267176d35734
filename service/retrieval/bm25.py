"""BM25 retrieval of whole documents from FileShare, Datafari's "classic" path."""

from __future__ import annotations

from typing import Any

from service.retrieval.base import RetrievedDocument
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient

DOCUMENT_FIELDS = "id,parent_id,title,url,content,score"


class Bm25Retriever:
    """edismax over `fields` with `q.op=operator`, `rows` documents; `tie` 1 sums a word's
    scores over the fields it matches (title and text scored as one), 0 keeps the best one.

    The query must already be sanitized; `uf=-*` is sent as well, so even then no field name
    or magic field (`_query_`) in the user's text can steer the parse.
    """

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        *,
        fields: str,
        operator: str,
        rows: int,
        tie: float = 1.0,
        scope: Scope = EVERYTHING,
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._fields = fields
        self._tie = tie
        self._operator = operator
        self._rows = rows
        self._scope = scope

    async def run(self, query: str) -> list[RetrievedDocument]:
        params: dict[str, str | int | float | list[str]] = {
            "q": query,
            "defType": "edismax",
            "qf": self._fields,
            "tie": self._tie,
            "q.op": self._operator,
            "uf": "-*",
            "lowercaseOperators": "false",
            "rows": self._rows,
            "fl": DOCUMENT_FIELDS,
        }
        params.update(self._scope.params())
        return documents_from_response(await self._solr.select(self._collection, params))


class DocumentById:
    """Fetches the one FileShare document a request names with `id`."""

    def __init__(self, solr: SolrClient, collection: str) -> None:
        self._solr = solr
        self._collection = collection

    async def run(self, document_id: str, scope: Scope = EVERYTHING) -> RetrievedDocument | None:
        """The document, or None when it is not there or the caller may not see it."""
        # The id travels in its own parameter: it is never parsed as query syntax.
        body = await self._solr.select(
            self._collection,
            {
                **scope.params(),
                "defType": "lucene",
                "q": "{!term f=id v=$rag.id}",
                "rag.id": document_id,
                "rows": 1,
                "fl": DOCUMENT_FIELDS,
            },
        )
        documents = documents_from_response(body)
        return documents[0] if documents else None


async def count_documents(solr: SolrClient, collection: str, scope: Scope) -> int:
    """How many documents of the collection the scope holds (a KAITO index: its size)."""
    body = await solr.select(
        collection, {**scope.params(), "defType": "lucene", "q": "*:*", "rows": 0}
    )
    return int(body.get("response", {}).get("numFound", 0))


def documents_from_response(body: dict[str, Any]) -> list[RetrievedDocument]:
    return [_document(doc) for doc in body.get("response", {}).get("docs", [])]


def _document(doc: dict[str, Any]) -> RetrievedDocument:
    return RetrievedDocument(
        id=str(doc["id"]),
        title=_text(doc.get("title")),
        url=_text(doc.get("url")),
        content=_text(doc.get("content")),
        score=float(doc.get("score", 0.0)),
        parent_id=doc.get("parent_id"),
    )


def _text(value: object) -> str:
    """Stored fields may come back as lists (multi-valued in a foreign schema)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(item) for item in value)
    return str(value)
