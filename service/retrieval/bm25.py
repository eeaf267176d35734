"""BM25 retrieval of whole documents from FileShare, Datafari's "classic" path."""

from __future__ import annotations

from typing import Any

from service.retrieval.base import RetrievedDocument
from service.retrieval.solr import SolrClient

DOCUMENT_FIELDS = "id,title,url,content,score"


class Bm25Retriever:
    """edismax over `fields` with `q.op=operator`, `rows` documents.

    The query must already be sanitized; `uf=-*` is sent as well, so even then no field name
    or magic field (`_query_`) in the user's text can steer the parse.
    """

    def __init__(
        self, solr: SolrClient, collection: str, *, fields: str, operator: str, rows: int
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._fields = fields
        self._operator = operator
        self._rows = rows

    async def run(self, query: str) -> list[RetrievedDocument]:
        body = await self._solr.select(
            self._collection,
            {
                "q": query,
                "defType": "edismax",
                "qf": self._fields,
                "q.op": self._operator,
                "uf": "-*",
                "lowercaseOperators": "false",
                "rows": self._rows,
                "fl": DOCUMENT_FIELDS,
            },
        )
        return documents_from_response(body)


class DocumentById:
    """Fetches the one FileShare document a request names with `id`."""

    def __init__(self, solr: SolrClient, collection: str) -> None:
        self._solr = solr
        self._collection = collection

    async def run(self, document_id: str) -> RetrievedDocument | None:
        # The id travels in its own parameter: it is never parsed as query syntax.
        body = await self._solr.select(
            self._collection,
            {
                "defType": "lucene",
                "q": "{!term f=id v=$rag.id}",
                "rag.id": document_id,
                "rows": 1,
                "fl": DOCUMENT_FIELDS,
            },
        )
        documents = documents_from_response(body)
        return documents[0] if documents else None


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
