"""Hostile queries: they may find nothing, but they never error and never steer Solr."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript

# "doc-xq17" is an id whose words appear in no document text: only a query that reached the
# id field (by local params or a field query) could find it.
HOSTILE = [
    "{!term f=id}doc-xq17",
    "{!lucene v=$q2}",
    "id:doc-xq17",
    '_query_:"{!term f=id}doc-xq17"',
    "*:*",
    "xq17 && doc || *",
    "\x00\x01\x02\x1b[31m",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_finds_nothing_and_does_not_error(
    client: TestClient, llm: LLMScript, query: str
) -> None:
    response = client.post("/ai/rag", json={"query": query})
    body = response.json()
    assert body["status"] == "ERROR"
    assert body["content"]["label"] in {"ragNoFileFound", "ragBadRequest"}
    assert response.status_code in {428, 400}
    assert llm.requests == []


def test_ten_kilobytes_of_query_are_cut_not_refused(client: TestClient, llm: LLMScript) -> None:
    query = "lighthouse keeper \x07\x00 " + "x" * 10_000
    response = client.post("/ai/rag", json={"query": query})
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "lighthouse"
    question = llm.requests[0].prompt.rsplit("Question:", 1)[1].split("\n\n", 1)[0].strip()
    assert len(question) <= 500
    assert "\x00" not in question
