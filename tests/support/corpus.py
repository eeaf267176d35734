"""The test corpus (tests/fixtures/corpus.json) as SourceDocuments: the tests' documents, and
the load benchmark's."""

from __future__ import annotations

import json
from pathlib import Path

from service.ingest import SourceDocument

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


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
