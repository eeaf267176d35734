"""BM25 retrieval of whole documents from FileShare, Datafari's "classic" path."""

from __future__ import annotations

from service.config.field_map import FieldMap, parse_fields
from service.retrieval.base import RetrievedDocument
from service.retrieval.reading import documents_from_response, id_params, read_params
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient
from service.text.language import guess_language

OUR_DOCUMENTS = parse_fields("", "documents")  # our configset's field names


class Bm25Retriever:
    """edismax over `fields` with `q.op=operator`, `rows` documents; `tie` 1 sums a word's
    scores over the fields it matches (title and text scored as one), 0 keeps the best one.

    The query must already be sanitized; `uf=-*` is sent as well, so even then no field name
    or magic field (`_query_`) in the user's text can steer the parse. `texts` False: hits
    are read by id and score alone (a TextReader reads those kept).
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
        field_map: FieldMap = OUR_DOCUMENTS,
        texts: bool = True,
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._texts = texts
        self._fields = fields
        self._map = field_map
        self._tie = tie
        self._operator = operator
        self._rows = rows
        self._scope = scope
        self.matched: int | None = None  # how many documents the last run matched in all

    async def run(self, query: str) -> list[RetrievedDocument]:
        schema = await self._solr.schema_fields(self._collection)
        lang = self._scope.lang
        params: dict[str, str | int | float | list[str]] = {
            "q": query,
            "defType": "edismax",
            # the question's own language's fields (and the neutral ones): a French question
            # is not matched by its little words in English texts; undecided, every language
            "qf": self._map.translated_qf(self._fields, guess_language(query) or None, schema),
            "tie": self._tie,
            "q.op": self._operator,
            "uf": "-*",
            "lowercaseOperators": "false",
            "rows": self._rows,
            **(read_params(self._map, schema) if self._texts else id_params(self._map)),
        }
        params.update(self._scope.params(self._map, schema))
        body = await self._solr.select(self._collection, params)
        matched = body.get("response", {}).get("numFound")
        self.matched = matched if isinstance(matched, int) else None
        return documents_from_response(body, self._map, lang)


class DocumentById:
    """Fetches the one FileShare document a request names with `id`."""

    def __init__(
        self, solr: SolrClient, collection: str, field_map: FieldMap = OUR_DOCUMENTS
    ) -> None:
        self._solr = solr
        self._collection = collection
        self._map = field_map

    async def run(self, document_id: str, scope: Scope = EVERYTHING) -> RetrievedDocument | None:
        """The document, or None when it is not there or the caller may not see it."""
        schema = await self._solr.schema_fields(self._collection)
        # The id travels in its own parameter: it is never parsed as query syntax.
        body = await self._solr.select(
            self._collection,
            {
                **scope.params(self._map, schema),
                "defType": "lucene",
                "q": f"{{!term f={self._map.field('id')} v=$rag.id}}",
                "rag.id": document_id,
                "rows": 1,
                **read_params(self._map, schema),
            },
        )
        documents = documents_from_response(body, self._map, scope.lang)
        return documents[0] if documents else None


async def count_documents(solr: SolrClient, collection: str, scope: Scope) -> int:
    """How many documents of the collection the scope holds (a KAITO index: its size)."""
    schema = await solr.schema_fields(collection)
    body = await solr.select(
        collection,
        {**scope.params(OUR_DOCUMENTS, schema), "defType": "lucene", "q": "*:*", "rows": 0},
    )
    return int(body.get("response", {}).get("numFound", 0))
