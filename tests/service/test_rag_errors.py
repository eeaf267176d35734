"""Every failure of SPEC.md §3 gives Datafari's error envelope with the right status."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from service.errors import TECHNICAL_MESSAGE
from testing.llm_server import LLMScript, Step
from testing.servers import free_port
from testing.service import ClientFactory


def ask_lighthouse(client: TestClient):
    return client.post("/ai/rag", json={"query": "lighthouse"})


def error_of(response, status: int, label: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "ERROR"
    assert body["content"]["code"] == str(status)
    assert body["content"]["label"] == label
    assert body["content"]["message"]
    assert isinstance(body["content"]["reason"], str)
    assert "Traceback" not in response.text
    return body["content"]


def test_rag_disabled_gives_ragErrorNotEnabled(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"ai.enable.rag": False})
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 403, "ragErrorNotEnabled"
    )
    assert content["message"] == "Sorry, it seems the feature is not enabled."
    assert llm.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"id": "orchard"}',
        b'{"query": ""}',
        b'{"query": 42}',
        b'{"query": "lighthouse", "history": [{"role": "tool", "content": "x"}]}',
        b'{"query": "lighthouse", "history": [{"role": "user"}]}',
        b'{"query": "lighthouse", "format": 5}',
        b'{"query": "lighthouse", "lang": 5}',
        b'{"query": "lighthouse", "lang": "not a language"}',
    ],
)
def test_bad_requests_give_ragBadRequest(client: TestClient, llm: LLMScript, body: bytes) -> None:
    response = client.post("/ai/rag", content=body, headers={"Content-Type": "application/json"})
    content = error_of(response, 400, "ragBadRequest")
    assert content["message"].startswith("Sorry, It appears there is an issue with the request.")
    assert llm.requests == []


def test_query_of_only_solr_syntax_is_a_bad_request(client: TestClient) -> None:
    error_of(client.post("/ai/rag", json={"query": "{}[]^~*"}), 400, "ragBadRequest")


def test_nothing_retrieved_gives_ragNoFileFound(client: TestClient, llm: LLMScript) -> None:
    content = error_of(client.post("/ai/rag", json={"query": "xylophonist"}), 428, "ragNoFileFound")
    assert content["message"] == (
        "Sorry, I couldn't find any relevant document to answer your request."
    )
    assert llm.requests == []


def test_unknown_id_gives_ragFileNotFound(client: TestClient, llm: LLMScript) -> None:
    response = client.post("/ai/rag", json={"query": "lighthouse", "id": "no-such-doc"})
    content = error_of(response, 404, "ragFileNotFound")
    assert "no-such-doc" in content["reason"]
    assert llm.requests == []


def test_empty_llm_answer_gives_ragNoValidAnswer(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="  \\n  "))
    error_of(client.post("/ai/rag", json={"query": "lighthouse"}), 428, "ragNoValidAnswer")


def test_solr_down_gives_ragTechnicalError(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client(
        {"solr.url": f"http://127.0.0.1:{free_port()}/solr", "solr.startup.check": False}
    )
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 503, "ragTechnicalError"
    )
    assert content["message"] == TECHNICAL_MESSAGE
    assert "Solr" in content["reason"]
    assert llm.requests == []


def test_solr_error_gives_ragTechnicalError(make_client: ClientFactory) -> None:
    client = make_client({"solr.bm25.qf": "no_such_field^2"})
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 502, "ragTechnicalError"
    )
    assert "Solr" in content["reason"]


def test_llm_down_gives_ragTechnicalError(make_client: ClientFactory) -> None:
    client = make_client({"ai.api.endpoint": f"http://127.0.0.1:{free_port()}/v1/"})
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 503, "ragTechnicalError"
    )
    assert "LLM" in content["reason"]


def test_llm_timeout_gives_ragTechnicalError_within_the_timeout(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"llm.timeout.read": 0.5})
    llm.then(Step(content="too late", delay=60))
    started = time.monotonic()
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 504, "ragTechnicalError"
    )
    assert time.monotonic() - started < 30  # the LLM's 60 s not waited out
    assert "llm.timeout.read" in content["reason"]


def test_llm_error_status_gives_ragTechnicalError(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="model overloaded", status=500))
    content = error_of(
        client.post("/ai/rag", json={"query": "lighthouse"}), 502, "ragTechnicalError"
    )
    assert "500" in content["reason"]


def test_llm_malformed_json_gives_ragTechnicalError(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(body="{this is not json", headers={"Content-Type": "application/json"}))
    error_of(client.post("/ai/rag", json={"query": "lighthouse"}), 502, "ragTechnicalError")


def test_llm_503_is_retried(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"llm.retries": 2})
    llm.then(Step(content="busy", status=503, headers={"Retry-After": "0"}))
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 200, response.text
    assert len(llm.requests) == 2


def test_api_token_never_appears_in_errors(make_client: ClientFactory, llm: LLMScript) -> None:
    token = "sk-test-0123456789abcdef"
    client = make_client({"ai.api.token": token})
    llm.then(Step(content=f"Incorrect API key provided: {token}", status=401))
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    error_of(response, 502, "ragTechnicalError")
    assert token not in response.text
    assert llm.requests[0].headers["authorization"] == f"Bearer {token}"


def test_unknown_route_under_ai_uses_the_envelope(client: TestClient) -> None:
    response = client.get("/ai/rag")
    assert response.status_code == 405
    assert response.json()["content"]["label"] == "ragMethodNotAllowed"  # labels by kind (issue 49)
