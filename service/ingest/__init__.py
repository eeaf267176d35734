"""Ingestion: files -> FileShare documents."""

from service.ingest.extract import SUPPORTED_SUFFIXES, SourceDocument, extract_bytes
from service.ingest.folder import Refused, extract, read_folder, source_files
from service.ingest.indexer import Indexer, IngestSummary, PassageIndex
from service.ingest.passages import Passage, PassageSplitter

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Indexer",
    "IngestSummary",
    "Passage",
    "PassageIndex",
    "PassageSplitter",
    "Refused",
    "SourceDocument",
    "extract",
    "extract_bytes",
    "read_folder",
    "source_files",
]
