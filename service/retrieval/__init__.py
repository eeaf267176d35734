"""Retrieval: the Solr client and the retrievers (BM25 on FileShare; more to come)."""

from service.retrieval.base import RetrievedDocument, Retriever
from service.retrieval.bm25 import Bm25Retriever, DocumentById
from service.retrieval.solr import SolrClient

__all__ = ["Bm25Retriever", "DocumentById", "RetrievedDocument", "Retriever", "SolrClient"]
