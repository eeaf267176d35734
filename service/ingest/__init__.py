"""Ingestion: files -> FileShare documents."""

from service.ingest.extract import (
    SUPPORTED_SUFFIXES,
    ExtractionFailed,
    SourceDocument,
    UnsupportedFile,
    extract,
    extract_bytes,
    find_files,
)
from service.ingest.indexer import Indexer, IngestSummary, PassageIndex
from service.ingest.passages import Passage, PassageSplitter

__all__ = [
    "SUPPORTED_SUFFIXES",
    "ExtractionFailed",
    "Indexer",
    "IngestSummary",
    "Passage",
    "PassageIndex",
    "PassageSplitter",
    "SourceDocument",
    "UnsupportedFile",
    "extract",
    "extract_bytes",
    "find_files",
]
