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
