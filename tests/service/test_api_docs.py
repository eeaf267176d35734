"""The documented API is the real one: /openapi.json validates and describes the chat body,
responses and streams; /docs and /redoc work with no network (their assets are ours)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import validate


@pytest.fixture
def document(client: TestClient) -> dict:
    return client.get("/openapi.json").json()


def test_the_openapi_document_is_valid(document: dict) -> None:
    validate(document)


def test_the_chat_endpoint_documents_its_body_answers_and_stream(document: dict) -> None:
    post = document["paths"]["/v1/chat/completions"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    request = document["components"]["schemas"][body.rsplit("/", 1)[-1]]
    assert {"messages", "model", "index_name", "stop", "response_format"} <= set(
        request["properties"]
    )
    assert request["required"] == ["messages"]
    ok = post["responses"]["200"]["content"]
    completion = ok["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    fields = document["components"]["schemas"][completion]["properties"]
    assert {"choices", "usage", "sources", "citations"} <= set(fields)
    chunk = ok["text/event-stream"]["x-event-data"]["$ref"].rsplit("/", 1)[-1]
    assert chunk in document["components"]["schemas"]
    assert {"400", "401", "404", "428", "502", "503", "504"} <= set(post["responses"])


def test_rag_documents_its_event_stream(document: dict) -> None:
    ok = document["paths"]["/ai/rag"]["post"]["responses"]["200"]
    assert "text/event-stream" in ok["content"]
    assert "`token`" in ok["description"] and "`done`" in ok["description"]


def test_datafari_paths_and_health_are_documented(document: dict, client: TestClient) -> None:
    """Issue 36, item 11: the Datafari paths were served but not in the spec; /health's body
    had no schema."""
    paths = document["paths"]
    for route in ("/ai/rag", "/ai/summarize", "/search/vector"):
        alias = paths[f"/Datafari/rest/v2.0{route}"]
        assert alias.keys() == paths[route].keys()
        for method, operation in alias.items():
            assert operation["operationId"] == paths[route][method]["operationId"] + "_datafari"
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))
    ready = paths["/health"]["get"]["responses"]
    for status in ("200", "503"):
        schema = ready[status]["content"]["application/json"]["schema"]["$ref"]
        health = document["components"]["schemas"][schema.rsplit("/", 1)[-1]]
        assert {"status", "checks"} <= set(health["properties"])
    answered = client.get("/health").json()
    assert answered["status"] == "up" and answered["checks"]["config"]["status"] == "up"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_documentation_pages_load_nothing_from_elsewhere(client: TestClient, page: str) -> None:
    html = client.get(page).text
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets, html
    assert "http://" not in html and "https://" not in html
    for asset in assets:
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert len(served.content) > 1000, asset
