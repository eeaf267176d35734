"""The custom agent's `solr-search` filters against the real Solr (issue 66, item 8): an
argument the LLM gives a `{{parameter}}` mark is one value, never query syntax, so the filter
keeps the template's meaning."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ClientFactory
from tests.service.test_datafari7 import AGENT_BODY, AGENTIC, events, of_type, tool_call

DOCUMENTS = [
    {
        "id": "cta-lighthouse",
        "title": "Lighthouse of Kervane Point",
        "content": "A colony of cormorants nests on the rocks below the Kervane lighthouse.",
        "url": "https://example.org/cta-lighthouse",
    },
    {
        "id": "cta-harbour",
        "title": "Harbour master's log",
        "content": "A colony of cormorants nests on the Kervane harbour wall every spring.",
        "url": "https://example.org/cta-harbour",
    },
]
BY_TITLE = {
    "type": "solr-search",
    "name": "searchByTitle",
    "description": "Search the documents whose title has a word.",
    "parameters": {"word": {"type": "string", "description": "A title word", "required": True}},
    "properties": {"handler": "/select", "fq": ["title:{{word}}"]},
}


@pytest.fixture
def indexed(solr_url: str) -> Iterator[None]:
    httpx.post(
        f"{solr_url}/FileShare/update", params={"commit": "true"}, json=DOCUMENTS, timeout=30
    ).raise_for_status()
    yield
    remove_documents(solr_url, [d["id"] for d in DOCUMENTS])


def test_an_argument_cannot_widen_a_title_filter(
    make_client: ClientFactory, llm: LLMScript, tmp_path: Path, indexed: None
) -> None:
    (tmp_path / "agentic-custom-tools.json").write_text(json.dumps([BY_TITLE]))
    client = make_client({**AGENTIC, "agentic.max.steps": 4})
    llm.then(
        tool_call("searchByTitle", q="Kervane cormorants colony", word="Lighthouse"),
        tool_call(
            "searchByTitle", q="Kervane cormorants colony", word="Lighthouse OR title:[* TO *]"
        ),
        tool_call("searchByTitle", q="Kervane cormorants colony", word='x" OR title:"harbour'),
    )
    llm.answer = lambda request: "Cormorants nest there [1]."
    sent = events(list(client.post("/ai/stream", json={**AGENT_BODY, "agent": "custom"})
                       .iter_lines()))  # fmt: skip
    assert [d["toolName"] for d in of_type(sent, "tool.call")] == ["searchByTitle"] * 3
    last_turn = [request for request in llm.requests if "tools" in request.body][-1]
    results = [m["content"] for m in last_turn.body["messages"] if m["role"] == "tool"]
    assert len(results) == 3
    # the filter narrows: the document titled with Lighthouse, not the other one
    assert "cta-lighthouse" in results[0] and "cta-harbour" not in results[0]
    # the finding: the whole argument is one title term, and no title holds it
    for injected in results[1:]:
        assert "cta-harbour" not in injected, injected
