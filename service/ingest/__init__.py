"""Ingestion: files -> FileShare documents."""

from service.ingest.extract import SUPPORTED_SUFFIXES, SourceDocument, extract, find_files
from service.ingest.indexer import Indexer, IngestSummary

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Indexer",
    "IngestSummary",
    "SourceDocument",
    "extract",
    "find_files",
]
