"""kNN retrieval of passages from VectorMain: the question embedded, then Solr's `{!knn}`, or
every passage of a small scope scored (exact search).

Solr's HNSW graph is approximate: at a million passages it must look for thousands of
neighbours to find 95% of the true ten (bench.scale_vectors), and under a filter that keeps a
tenth of them that search is slower (p95 185 ms at depth 2400) than scoring each of the tenth
(74 ms, recall 1.0; bench.scale_exact). So a scope of at most `exact_max` passages
(knn.exact.max) is searched exactly, by Solr's `vectorSimilarity` function over the filtered
passages; a larger one by the graph. The scope's size is Solr's count of its filters
(service.retrieval.counts: a minute's cache), asked while the question is embedded; a count
that fails or is late chooses the graph.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Literal

from service.config.field_map import FieldMap, parse_fields
from service.errors import TechnicalError, UpstreamBadResponse
from service.flights import left_behind
from service.llm.embeddings import EmbeddingsClient
from service.metrics import VECTOR_SEARCHES
from service.retrieval.base import RetrievedDocument
from service.retrieval.counts import count
from service.retrieval.embedding_mode import PARSER_NAME, EmbeddingMode
from service.retrieval.reading import documents_from_response, id_params, read_params
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient

# how long a vector search waits for its scope's count once the question is embedded
COUNT_GRACE_SECONDS = 0.25
EXACT = "{!func}vectorSimilarity("  # every passage of the scope scored: (field,[vector])


class VectorRetriever:
    """The `top_k` passages nearest to the question (cosine), within `scope`, those at least
    `min_similarity` similar; Solr's HNSW search looks for `depth` neighbours (knn.depth),
    of which those are the nearest (`rescore`: by their float vectors, knn.rescore); a
    scope of at most `exact_max` passages is searched exactly (knn.exact.max; 0: never).
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
        exact_max: int = 0,
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
        self._exact_max = exact_max
        self._scope = scope
        # Solr scores a cosine kNN hit (1 + cosine) / 2
        self._min_score = (1 + min_similarity) / 2 if min_similarity > 0 else 0.0

    async def run(self, query: str) -> list[RetrievedDocument]:
        schema = await self._solr.schema_fields(self._collection)
        scope = self._scope.params(self._map, schema)
        how, search = await self._search(query, scope)
        params: dict[str, str | int | list[str]] = {
            "defType": "lucene",
            "rows": self._top_k,
            **(read_params(self._map, schema) if self._texts else id_params(self._map)),
            **search,
            **scope,
        }
        body = await self._solr.select(self._collection, params)
        VECTOR_SEARCHES.labels(how=how).inc()
        found = documents_from_response(body, self._map, self._scope.lang)
        # exact search scores a passage without a vector 0: never a neighbour
        return [p for p in found if p.score >= self._min_score and p.score > 0]

    async def _search(
        self, query: str, scope: dict[str, str | list[str]]
    ) -> tuple[Literal["exact", "graph"], dict[str, str]]:
        """How the scope is searched, and the search: the question's text for Solr to embed
        and search the graph with (by reference, so no character of it is read as query
        syntax), or its vector, with which the scope's passages are all scored when they are
        few enough, the graph searched otherwise."""
        if self._mode is not None and await self._mode.solr_embeds(self._solr):
            local = f"f={self._field} topK={self._depth} v=$question_text"
            # e5's "query: " too (the plugin embeds passages as they are: a passage to e5)
            text = self._embeddings.prefixes["query"] + query
            return "graph", {"q": f"{{!{PARSER_NAME} {local}}}", "question_text": text}
        counted = None
        if self._exact_max > 0:  # the scope counted while the question is embedded
            counted = asyncio.ensure_future(count(self._solr, self._collection, scope))
            counted.add_done_callback(left_behind)
        try:
            (vector,) = await self._embeddings.embed([query], kind="query")
        except BaseException:
            if counted is not None:
                counted.cancel()
            raise
        exact = counted is not None and await self._small(counted)
        if not vector:
            raise UpstreamBadResponse("the embeddings API returned an empty vector")
        literal = vector_literal(vector)
        if exact:  # scored as the graph scores a hit: (1 + cosine) / 2 for a cosine field
            return "exact", {"q": f"{EXACT}{self._field},{literal})"}
        knn = {"q": f"{{!knn f={self._field} topK={self._depth}}}{literal}"}
        if self._rescore:  # the neighbours scored again by their float vectors (knn.rescore)
            knn["rq"] = (
                f"{{!rerank reRankQuery=$rescore_q reRankDocs={self._depth} reRankWeight=1 "
                "reRankOperator=replace}"
            )
            knn["rescore_q"] = f"{{!func}}vectorSimilarity({self._field},{literal})"
        return "graph", knn

    async def _small(self, counted: asyncio.Future[int]) -> bool:
        """Whether the scope's passages are few enough to score each (knn.exact.max); a
        count that failed, or is not back COUNT_GRACE_SECONDS after the question's vector,
        chooses the graph this time (the count goes on, for the next question)."""
        try:
            async with asyncio.timeout(COUNT_GRACE_SECONDS):
                return await asyncio.shield(counted) <= self._exact_max
        except (TechnicalError, TimeoutError):
            return False


def vector_literal(vector: Iterable[float]) -> str:
    """A vector as Solr's knn and vectorSimilarity read it: `[0.1234567,...]`, 7 digits."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
