"""One client must not stall everyone (issue 39): what an anonymous or a single caller sends
costs bounded work, on the service's real HTTP stack with the real Solr and LLM servers."""

from __future__ import annotations

import json

import pytest

from service.api.payload import MAX_DEPTH, QUESTION_BYTES
from tests.conftest import ADMIN_TOKEN, ClientFactory

DEEP = b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5)
# a body the service must refuse if it parsed it (too deep): who answers first shows the order
ANONYMOUS = {"Content-Type": "application/json"}


# -- item 1: JSON bodies are read after routing and authentication, within the route's limit --


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_path_no_route_serves_never_parses_the_body(
    make_client: ClientFactory, content_type: str
) -> None:
    client = make_client()
    response = client.post("/no/such/route", content=DEEP, headers={"Content-Type": content_type})
    assert response.status_code == 404, response.text


@pytest.mark.parametrize("path", ["/ai/rag", "/ai/summarize", "/v1/chat/completions"])
def test_a_caller_without_the_api_key_is_refused_before_its_body_is_read(
    make_client: ClientFactory, path: str
) -> None:
    client = make_client({"api.keys": "the-key"})
    response = client.post(path, content=DEEP, headers=ANONYMOUS)
    assert response.status_code == 401, response.text
    # with the key, the same body is read and refused for what it is
    keyed = {**ANONYMOUS, "X-API-Key": "the-key"}
    response = client.post(path, content=DEEP, headers=keyed)
    assert response.status_code == 400, response.text
    assert "nested too deep" in response.text


@pytest.mark.parametrize("path", ["/admin/config", "/documents"])
def test_admin_bodies_are_read_only_with_the_admin_token(
    make_client: ClientFactory, path: str
) -> None:
    client = make_client()
    method = client.patch if path == "/admin/config" else client.post
    assert method(path, content=DEEP, headers=ANONYMOUS).status_code == 401
    admin = {**ANONYMOUS, "Authorization": f"Bearer {ADMIN_TOKEN}"}
    response = method(path, content=DEEP, headers=admin)
    assert response.status_code == 400, response.text
    assert "nested too deep" in response.text


def test_a_question_body_is_bounded_by_its_route_not_by_the_upload_limit(
    make_client: ClientFactory,
) -> None:
    client = make_client({"request.max.bytes": 8 * QUESTION_BYTES})
    padding = "x" * QUESTION_BYTES
    body = json.dumps({"query": "lamp", "history": [{"role": "user", "content": padding}]})
    response = client.post("/ai/rag", content=body, headers=ANONYMOUS)
    assert response.status_code == 413, response.text
    assert str(QUESTION_BYTES) in response.json()["content"]["reason"]
    # a chunked body (no Content-Length) is counted as it arrives
    response = client.post(
        "/ai/rag", content=iter([body[:1000].encode(), body[1000:].encode()]), headers=ANONYMOUS
    )
    assert response.status_code == 413, response.text


def test_a_large_valid_body_is_parsed_off_the_loop_and_served(make_client: ClientFactory) -> None:
    client = make_client()
    history = [{"role": "user", "content": "lamp " * 160}] * 90
    body = json.dumps({"query": "lamp", "history": history})
    assert len(body) > 64 * 1024
    response = client.post("/ai/rag", content=body, headers=ANONYMOUS)
    assert response.status_code in (200, 428), response.text
    assert response.json()["status"] in ("OK", "ERROR")
