"""The test corpus (tests/fixtures/corpus.json) as SourceDocuments: the tests' documents, and
the load benchmark's."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import httpx

from service.ingest import SourceDocument

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def load_corpus() -> list[SourceDocument]:
    records = json.loads((FIXTURES / "corpus.json").read_text(encoding="utf-8"))
    return [
        SourceDocument(
            id=r["id"],
            title=r["title"],
            url=r.get("url", f"https://example.org/{r['id']}"),
            content=r["content"],
            language=r.get("language", "en"),
        )
        for r in records
    ]


def remove_documents(solr_url: str, ids: Iterable[str]) -> None:
    """Documents a test added, gone from FileShare, and their passages from VectorMain."""
    quoted = " OR ".join(json.dumps(document_id) for document_id in ids)
    for collection, field in (("FileShare", "id"), ("VectorMain", "parent_id")):
        httpx.post(
            f"{solr_url}/{collection}/update",
            params={"commit": "true"},
            json={"delete": {"query": f"{field}:({quoted})"}},
            timeout=30,
        ).raise_for_status()
