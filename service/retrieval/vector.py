"""kNN retrieval of passages from VectorMain: the question embedded, then Solr's `{!knn}`."""

from __future__ import annotations

from collections.abc import Iterable

from service.config.field_map import FieldMap, parse_fields
from service.errors import UpstreamBadResponse
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.base import RetrievedDocument
from service.retrieval.embedding_mode import PARSER_NAME, EmbeddingMode
from service.retrieval.reading import documents_from_response, id_params, read_params
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient


class VectorRetriever:
    """The `top_k` passages nearest to the question (cosine), within `scope`, those at least
    `min_similarity` similar; Solr's HNSW search looks for `depth` neighbours (knn.depth),
    of which those are the nearest (`rescore`: by their float vectors, knn.rescore).
    `texts` False: hits are read by id and score alone.

    The question is embedded by the same OpenAI-compatible embeddings API that embedded the
    passages at ingestion: by the service, or by Solr when `mode` says Solr embeds (the
    question's text goes to `{!text_to_vector_knn}`). Solr filters (`fq`) apply before the
    nearest neighbours are taken.
    """

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        embeddings: EmbeddingsClient,
        *,
        field: str,
        top_k: int,
        scope: Scope = EVERYTHING,
        min_similarity: float = 0.0,
        mode: EmbeddingMode | None = None,
        field_map: FieldMap | None = None,
        depth: int = 0,
        rescore: bool = False,
        texts: bool = True,
    ) -> None:
        self._solr = solr
        self._map = field_map or parse_fields("", "passages")
        self._mode = mode
        self._collection = collection
        self._embeddings = embeddings
        self._field = field
        self._top_k = top_k
        self._texts = texts
        # HNSW looks for this many neighbours, of which the `top_k` nearest are kept
        self._depth = max(top_k, depth)
        self._rescore = rescore
        self._scope = scope
        # Solr scores a cosine kNN hit (1 + cosine) / 2
        self._min_score = (1 + min_similarity) / 2 if min_similarity > 0 else 0.0

    async def run(self, query: str) -> list[RetrievedDocument]:
        schema = await self._solr.schema_fields(self._collection)
        params: dict[str, str | int | list[str]] = {
            "defType": "lucene",
            "rows": self._top_k,
            **(read_params(self._map, schema) if self._texts else id_params(self._map)),
            **await self._knn(query),
        }
        params.update(self._scope.params(self._map, schema))
        body = await self._solr.select(self._collection, params)
        found = documents_from_response(body, self._map, self._scope.lang)
        return [passage for passage in found if passage.score >= self._min_score]

    async def _knn(self, query: str) -> dict[str, str]:
        """The kNN query: the question's vector, or its text for Solr to embed (by reference,
        so no character of it is read as query syntax)."""
        if self._mode is not None and await self._mode.solr_embeds(self._solr):
            local = f"f={self._field} topK={self._depth} v=$question_text"
            # e5's "query: " too (the plugin embeds passages as they are: a passage to e5)
            text = self._embeddings.prefixes["query"] + query
            return {"q": f"{{!{PARSER_NAME} {local}}}", "question_text": text}
        (vector,) = await self._embeddings.embed([query], kind="query")
        if not vector:
            raise UpstreamBadResponse("the embeddings API returned an empty vector")
        literal = vector_literal(vector)
        knn = {"q": f"{{!knn f={self._field} topK={self._depth}}}{literal}"}
        if self._rescore:  # the neighbours scored again by their float vectors (knn.rescore)
            knn["rq"] = (
                f"{{!rerank reRankQuery=$rescore_q reRankDocs={self._depth} reRankWeight=1 "
                "reRankOperator=replace}"
            )
            knn["rescore_q"] = f"{{!func}}vectorSimilarity({self._field},{literal})"
        return knn


def vector_literal(vector: Iterable[float]) -> str:
    """A vector as Solr's knn and vectorSimilarity read it: `[0.1234567,...]`, 7 digits."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
