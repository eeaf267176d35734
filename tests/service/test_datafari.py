"""A Datafari front-end, unchanged (issue 17): its paths under /Datafari/rest/v2.0, the
deprecated RAG through the search API, and the inputs Datafari accepts."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript
from tests.conftest import ClientFactory
from tests.service.test_rag_errors import error_of

PREFIX = "/Datafari/rest/v2.0"
QUESTION = "When was the lighthouse lamp electrified?"


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "OK"
    return body


def test_the_datafari_paths_are_our_routes(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"ai.enable.summarization": True})
    answer = ok(client.post(f"{PREFIX}/ai/rag", json={"query": QUESTION}))
    assert answer["content"]["documents"][0]["id"] == "lighthouse"
    summary = ok(client.post(f"{PREFIX}/ai/summarize", json={"id": "lighthouse"}))
    assert summary["content"]["message"]
    passages = ok(client.get(f"{PREFIX}/search/vector", params={"queryrag": QUESTION}))
    assert passages["content"]["documents"]
    assert len(llm.requests) == 2


def test_errors_on_the_datafari_paths_keep_the_envelope(client: TestClient) -> None:
    error_of(client.post(f"{PREFIX}/ai/rag", json={"query": ""}), 400, "ragBadRequest")
    error_of(client.post(f"{PREFIX}/ai/summarize", json={}), 400, "summarizationBadRequest")
    assert client.get(f"{PREFIX}/admin/config").status_code == 404  # only the RagAPI's routes
    assert client.post(f"{PREFIX}x/ai/rag", json={"query": QUESTION}).status_code == 404


def test_the_deprecated_search_select_answers_in_the_rag_envelope(
    client: TestClient, llm: LLMScript
) -> None:
    for path in ("/search/select", f"{PREFIX}/search/select"):
        params = {"q": QUESTION, "action": "rag", "format": "bulletpoint", "lang": "fr"}
        answer = ok(client.get(path, params=params))
        assert answer["content"]["documents"][0]["id"] == "lighthouse"
        assert answer["content"]["message"].startswith("Test answer to:")
    system = llm.requests[-1].messages[0]
    assert "Answer in French." in system["content"] and "bullet" in system["content"].lower()
    content = error_of(client.get("/search/select", params={"q": "x", "action": "facets"}), 400,
                       "ragBadRequest")  # fmt: skip
    assert "action=rag" in content["reason"]
    error_of(client.get("/search/select", params={"action": "rag"}), 400, "ragBadRequest")
    error_of(client.get("/search/select", params={"q": "x", "action": "rag", "lang": "??"}), 400,
             "ragBadRequest")  # fmt: skip


@pytest.mark.parametrize(
    "lenient",
    [{"lang": ""}, {"format": "poem"}, {"format": ""}, {"lang": "", "format": "haiku"}],
)
def test_what_datafari_accepts_is_answered(
    client: TestClient, llm: LLMScript, lenient: dict
) -> None:
    answer = ok(client.post("/ai/rag", json={"query": QUESTION, **lenient}))
    assert answer["content"]["documents"][0]["id"] == "lighthouse"


def test_a_system_message_in_the_history_is_kept(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"chat.memory.enabled": True})
    history = [
        {"role": "system", "content": "Answer like a lighthouse keeper."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Ahoy."},
    ]
    ok(client.post("/ai/rag", json={"query": QUESTION, "history": history}))
    sent = llm.requests[0].messages
    assert {"role": "system", "content": "Answer like a lighthouse keeper."} in sent
    assert {"role": "assistant", "content": "Ahoy."} in sent
