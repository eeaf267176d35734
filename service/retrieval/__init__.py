"""Retrieval: the Solr client and the retrievers (BM25, kNN, hybrid) sharing one interface."""

from service.retrieval.base import RetrievedDocument, Retriever
from service.retrieval.bm25 import Bm25Retriever, DocumentById, count_documents
from service.retrieval.fusion import (
    HybridRetriever,
    Ranking,
    reciprocal_rank_fusion,
    score_fusion,
)
from service.retrieval.scope import Scope
from service.retrieval.solr import SolrClient
from service.retrieval.vector import VectorRetriever

__all__ = [
    "Bm25Retriever",
    "DocumentById",
    "HybridRetriever",
    "Ranking",
    "RetrievedDocument",
    "Retriever",
    "Scope",
    "SolrClient",
    "VectorRetriever",
    "count_documents",
    "reciprocal_rank_fusion",
    "score_fusion",
]
