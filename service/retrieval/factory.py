"""The retriever the settings ask for: BM25 on FileShare, kNN or hybrid on VectorMain."""

from __future__ import annotations

from service.config.settings import RetrievalSettings, SolrSettings
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.base import Retriever
from service.retrieval.bm25 import Bm25Retriever
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.fusion import HybridRetriever
from service.retrieval.in_memory import InMemorySearch
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient
from service.retrieval.texts import TextReader
from service.retrieval.vector import VectorRetriever


def vector_retriever(
    layout: SolrSettings,
    solr: SolrClient,
    embeddings: EmbeddingsClient,
    *,
    top_k: int,
    scope: Scope = EVERYTHING,
    min_similarity: float = 0.0,
    mode: EmbeddingMode | None = None,
    depth: int = 0,
    rescore: bool = False,
    exact_max: int = 0,
    texts: bool = True,
) -> VectorRetriever:
    """kNN over VectorMain's passages, whatever `retrieval.method` says (/search/vector);
    `mode`: whether Solr embeds the question (None: the service does)."""
    return VectorRetriever(
        solr,
        layout.passages_collection,
        embeddings,
        field=layout.passages_map.field("vector"),
        top_k=top_k,
        scope=scope,
        min_similarity=min_similarity,
        mode=mode,
        field_map=layout.passages_map,
        depth=depth,
        rescore=rescore,
        exact_max=exact_max,
        texts=texts,
    )


def build_retriever(
    method: RetrievalSettings,
    layout: SolrSettings,
    solr: SolrClient,
    embeddings: EmbeddingsClient,
    *,
    scope: Scope = EVERYTHING,
    mode: EmbeddingMode | None = None,
    in_memory: InMemorySearch | None = None,
    reads: frozenset[str] | None = None,
) -> Retriever:
    """The search `method` names, on the collections `layout` names; `scope` limits what is
    searched: the caller's groups, one document's passages; `mode`: whether Solr embeds;
    `in_memory`: BM25's documents ranked by passage (rag.enable.vector.search); `reads`: the
    languages the embedding model reads (None: any), hybrid leaning on BM25 for others."""
    rows = method.limit
    if method.in_force == "bm25":
        documents = Bm25Retriever(
            solr,
            layout.documents_collection,
            fields=method.bm25_fields,
            operator=method.operator,
            rows=rows,
            tie=method.bm25_tie,
            scope=scope.with_parent(None),  # whole documents: no parent to keep
            field_map=layout.documents_map,
        )
        return in_memory.around(documents, embeddings) if in_memory else documents
    if method.in_force == "vector":
        return vector_retriever(
            layout,
            solr,
            embeddings,
            scope=scope,
            top_k=rows,
            min_similarity=method.similarity_min,
            mode=mode,
            depth=method.knn_depth,
            rescore=method.knn_rescore,
            exact_max=method.knn_exact_max,
        )
    depth = max(rows, method.candidates)
    lexical = Bm25Retriever(
        solr,
        layout.passages_collection,
        fields=method.bm25_fields,
        operator=method.operator,
        rows=depth,
        tie=method.bm25_tie,
        scope=scope,
        field_map=layout.passages_map,
        texts=False,
    )
    semantic = vector_retriever(
        layout,
        solr,
        embeddings,
        scope=scope,
        top_k=depth,
        min_similarity=method.similarity_min,
        mode=mode,
        depth=method.knn_depth,
        rescore=method.knn_rescore,
        exact_max=method.knn_exact_max,
        texts=False,
    )
    return HybridRetriever(
        lexical,
        semantic,
        fusion=method.fusion,
        k=method.rrf_k,
        lexical_weight=method.bm25_weight,
        semantic_weight=method.vector_weight,
        limit=rows,
        needs_meaning=method.similarity_min > 0 and method.needs_meaning,
        reads=reads,
        foreign_weight=method.foreign_weight,
        flat_spread=method.flat_spread,
        texts=TextReader(
            solr, layout.passages_collection, scope=scope, field_map=layout.passages_map
        ),
    )
