"""The texts of the hits a ranking kept, read by id after the ranking (hybrid's fusion).

Hybrid's two rankings bring 100 candidates each (hybrid.candidates) to a fusion that keeps
10 (solr.topK). Reading every candidate's text costs Solr a stored-field read and a
highlighter pass each (retrieval/reading.py), most of a hybrid search's time (150 ms of 180
at 10,000 passages, bench.scale); so the rankings read ids and scores alone, and the texts of
the ten kept are read here, in one request, within the same scope (its security filters
again: a hit is never read beyond what the caller may see).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from service.config.field_map import FieldMap
from service.retrieval.base import RetrievedDocument
from service.retrieval.reading import documents_from_response, read_params
from service.retrieval.scope import EVERYTHING, Scope, terms_query
from service.retrieval.solr import SolrClient


class TextReader:
    """Reads `hits` whole (title, address, bounded text) from `collection`, in their order and
    with their scores; a hit gone meanwhile (deleted, or outside `scope`) is left out."""

    def __init__(
        self, solr: SolrClient, collection: str, *, scope: Scope = EVERYTHING, field_map: FieldMap
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._scope = scope
        self._map = field_map

    async def run(self, hits: Sequence[RetrievedDocument]) -> list[RetrievedDocument]:
        ids: dict[str, str | list[str]] = {}
        query = terms_query(self._map.field("id"), [hit.id for hit in hits], "rag.ids", ids)
        if not query:
            return []
        schema = await self._solr.schema_fields(self._collection)
        params: dict[str, str | int | list[str]] = {
            "defType": "lucene",
            "rows": len(hits),
            **read_params(self._map, schema, score=False),
            **self._scope.params(self._map, schema),
            "q": query,
            **ids,
        }
        body = await self._solr.select(self._collection, params)
        read = {doc.id: doc for doc in documents_from_response(body, self._map, self._scope.lang)}
        return [replace(read[hit.id], score=hit.score) for hit in hits if hit.id in read]
