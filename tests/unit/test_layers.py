"""The house's one rule about Solr (docs/architecture.md): only retrieval/ and ingest/ speak to
it; the answer cache asks retrieval/ (issue 49, step 2), the kept conversations their own
records module (conversations/records.py, issue 67), and nothing else of theirs does."""

from __future__ import annotations

import re
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
SPEAKS_TO_SOLR = re.compile(
    r"\b(?:solr|_solr)\.(?:select|add|update|delete_by_query|get|schema_fields|config)\("
)
ALLOWED = ("retrieval", "ingest")
RECORDS = ("conversations/records.py",)  # a package's own collection, behind one module


def test_only_retrieval_and_ingestion_speak_to_solr() -> None:
    speaking = sorted(
        str(path.relative_to(SERVICE))
        for path in SERVICE.rglob("*.py")
        if path.relative_to(SERVICE).parts[0] not in ALLOWED
        and path.relative_to(SERVICE).as_posix() not in RECORDS
        and SPEAKS_TO_SOLR.search(path.read_text(encoding="utf-8"))
    )
    assert speaking == []


# the edges: they may import the domain, never the other way round
EDGES = ("service.api", "service.cli", "service.web")
# what only the domain does: an LLM call, a prompt rendered, a Solr query
DOMAIN_WORK = re.compile(
    r"\bllm\.(?:complete|with_tools|stream|chat)\w*\(|prompts\.render\(|documents_matching\("
)


def test_the_domain_never_imports_the_edges() -> None:
    from testing.imports import import_graph

    inward = sorted(
        f"{edge.source} -> {edge.target}"
        for edge in import_graph()
        if not edge.source.startswith(EDGES) and edge.target.startswith(EDGES)
    )
    assert inward == []


def test_api_holds_transport_only() -> None:
    """api/ validates, identifies and renders: no LLM call, no prompt, no Solr query of its
    own (issue 67); the OpenAI relay (openai.passthrough) is a proxy's and is allowed."""
    working = sorted(
        str(path.relative_to(SERVICE))
        for path in (SERVICE / "api").rglob("*.py")
        if DOMAIN_WORK.search(path.read_text(encoding="utf-8"))
        or SPEAKS_TO_SOLR.search(path.read_text(encoding="utf-8"))
    )
    assert working == []
