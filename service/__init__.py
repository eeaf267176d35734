"""solr-rag: retrieval-augmented generation over Apache Solr 9.8, Datafari RagAPI compatible."""

__version__ = "0.1.0"
