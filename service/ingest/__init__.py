"""Ingestion: files -> FileShare documents."""

from service.ingest.extract import (
    SUPPORTED_SUFFIXES,
    SourceDocument,
    extract,
    extract_bytes,
    find_files,
)
from service.ingest.indexer import Indexer, IngestSummary, PassageIndex
from service.ingest.passages import Passage, PassageSplitter

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Indexer",
    "IngestSummary",
    "Passage",
    "PassageIndex",
    "PassageSplitter",
    "SourceDocument",
    "extract",
    "extract_bytes",
    "find_files",
]
