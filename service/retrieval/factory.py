"""The retriever the settings ask for: BM25 on FileShare, kNN or hybrid on VectorMain."""

from __future__ import annotations

from service.config import Settings
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.base import Retriever
from service.retrieval.bm25 import Bm25Retriever
from service.retrieval.fusion import HybridRetriever
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.solr import SolrClient
from service.retrieval.vector import VectorRetriever


def vector_retriever(
    settings: Settings,
    solr: SolrClient,
    embeddings: EmbeddingsClient,
    *,
    scope: Scope = EVERYTHING,
    top_k: int | None = None,
) -> VectorRetriever:
    """kNN over VectorMain's passages, whatever `retrieval.method` says (/search/vector)."""
    return VectorRetriever(
        solr,
        settings.passages_collection,
        embeddings,
        field=settings.vector_field,
        top_k=top_k or settings.top_k,
        scope=scope,
    )


def build_retriever(
    settings: Settings,
    solr: SolrClient,
    embeddings: EmbeddingsClient,
    *,
    scope: Scope = EVERYTHING,
    top_k: int | None = None,
) -> Retriever:
    """`scope` limits what is searched: the caller's groups, one document's passages."""
    rows = top_k or settings.top_k
    if settings.retrieval == "bm25":
        return Bm25Retriever(
            solr,
            settings.documents_collection,
            fields=settings.solr_bm25_fields,
            operator=settings.rag_operator,
            rows=settings.max_files,
            tie=settings.solr_bm25_tie,
            scope=Scope(groups=scope.groups),
        )
    semantic = vector_retriever(settings, solr, embeddings, scope=scope, top_k=rows)
    if settings.retrieval == "vector":
        return semantic
    lexical = Bm25Retriever(
        solr,
        settings.passages_collection,
        fields=settings.solr_bm25_fields,
        operator=settings.rag_operator,
        rows=rows,
        tie=settings.solr_bm25_tie,
        scope=scope,
    )
    return HybridRetriever(
        lexical,
        semantic,
        k=settings.rrf_k,
        lexical_weight=settings.hybrid_bm25_weight,
        semantic_weight=settings.hybrid_vector_weight,
        limit=rows,
    )
