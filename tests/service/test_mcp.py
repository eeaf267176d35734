"""The MCP server: the official SDK's client over streamable HTTP (/mcp, the service on a real
socket) and over stdio (`solr-rag mcp`), LangChain's MCP adapters, and the REST API's security
holding for MCP clients."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ServiceFactory, write_properties

QUESTION = "When was the lighthouse lamp electrified?"
ACL_DOCUMENTS = [
    {
        "id": "mcp-acl-a",
        "title": "Quince jam (group A)",
        "content": "The quince jam recipe of team A simmers the fruit for forty minutes.",
        "allowed_groups": ["team-a"],
    },
    {
        "id": "mcp-acl-b",
        "title": "Bergamot jam (group B)",
        "content": "The bergamot-zq jam recipe of team B needs a whole night of soaking.",
        "allowed_groups": ["team-b"],
    },
]
SECRETS = ("bergamot-zq", "night of soaking")


@asynccontextmanager
async def http_session(
    base: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def result_of(called: Any) -> dict[str, Any]:
    """A tool's structured result (what the SDK parsed), checked against its text form."""
    assert not called.isError, called.content
    assert json.loads(called.content[0].text) == called.structuredContent
    return called.structuredContent


async def test_the_tools_are_listed_with_schemas_and_descriptions(service: ServiceFactory) -> None:
    async with http_session(service()) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search", "ask", "summarize", "get_document", "list_indexes"}
    for tool in tools.values():
        assert tool.description and tool.inputSchema["type"] == "object" and tool.outputSchema
    assert tools["search"].inputSchema["properties"]["top_k"]["maximum"] == 50
    assert "query" in tools["search"].inputSchema["required"]


async def test_search_ask_and_read_a_document_over_http(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"retrieval.method": "bm25", "ai.enable.summarization": True})
    async with http_session(base) as session:
        found = result_of(
            await session.call_tool("search", {"query": "lighthouse lamp", "top_k": 3})
        )
        assert found["sources"][0]["id"] == "lighthouse"
        assert found["sources"][0]["url"] == "https://example.org/lighthouse"
        assert len(found["sources"]) <= 3 and "lamp" in found["sources"][0]["excerpt"]
        answered = result_of(await session.call_tool("ask", {"question": QUESTION}))
        assert answered["answer"].startswith(f"Test answer to: {QUESTION} It says:")
        assert answered["sources"][0] == {
            "number": 1,
            "id": "lighthouse",
            "title": "The lighthouse keeper",
            "url": "https://example.org/lighthouse",
            "cited": True,
        }
        assert answered["llm_calls"] == 1 and "electrified" in llm.requests[0].prompt
        document = result_of(await session.call_tool("get_document", {"id": "lighthouse"}))
        assert "electrified" in document["content"] and document["truncated"] is False
        resource = await session.read_resource("solr-rag://doc/lighthouse")
        assert resource.contents[0].text == document["content"]
        summary = result_of(await session.call_tool("summarize", {"id": "lighthouse"}))
        assert summary["summary"]
        assert result_of(await session.call_tool("list_indexes", {})) == {"indexes": []}


async def test_a_long_tool_call_tells_a_host_that_asked_it_is_still_working(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """Issue 83: a host that asked for progress (the SDK's progress_callback: a progress
    token in the request) is sent MCP progress notifications while the answer is worked on,
    one as each stage begins (a host resets its request timeout on each); without a token,
    the same answer comes as one JSON response, no notification."""
    base = service({"retrieval.method": "bm25", "ai.enable.summarization": True})
    said: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        said.append((done, message))

    async with http_session(base) as session:
        answered = await session.call_tool("ask", {"question": QUESTION},
                                           progress_callback=progress)  # fmt: skip
        assert result_of(answered)["answer"].startswith(f"Test answer to: {QUESTION}")
        assert said and [done for done, _ in said] == list(range(1, len(said) + 1)), said
        messages = [message for _, message in said]
        assert messages[0] == "started" and "retrieve" in messages and "chain" in messages
        said.clear()
        summary = await session.call_tool("summarize", {"id": "lighthouse"},
                                          progress_callback=progress)  # fmt: skip
        assert result_of(summary)["summary"] and said
    # without a token: one JSON response, as before
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "ask", "arguments": {"question": QUESTION}}}  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    plain = httpx.post(f"{base}/mcp", json=request, headers=accept, timeout=60)
    assert plain.headers["content-type"].startswith("application/json"), plain.text
    assert plain.json()["result"]["structuredContent"]["answer"]
    # with one: an SSE stream, the notifications before the result
    request["params"]["_meta"] = {"progressToken": "p-1"}
    streamed = httpx.post(f"{base}/mcp", json=request, headers=accept, timeout=60)
    assert streamed.headers["content-type"].startswith("text/event-stream"), streamed.text
    sent = [json.loads(line[5:]) for line in streamed.text.splitlines()
            if line.startswith("data:") and line[5:].strip()]  # fmt: skip
    assert sent[0]["method"] == "notifications/progress"
    assert sent[0]["params"]["progressToken"] == "p-1"
    assert sent[-1]["id"] == 7 and sent[-1]["result"]["structuredContent"]["answer"]


async def test_errors_are_the_tools_own_with_the_reason(service: ServiceFactory) -> None:
    async with http_session(service()) as session:
        missing = await session.call_tool("get_document", {"id": "no-such-document"})
        assert missing.isError and "no-such-document" in missing.content[0].text
        bad = await session.call_tool("search", {"query": "x", "top_k": 500})
        assert bad.isError and "top_k" in bad.content[0].text
        # which argument and what it must be, not pydantic's report repeating the input
        typed = await session.call_tool("search", {"query": 123, "top_k": "many"})
        text = typed.content[0].text
        assert typed.isError and "query" in text and "top_k" in text, text
        assert "pydantic" not in text and "input_value" not in text, text
        both = await session.call_tool("summarize", {"id": "lighthouse", "text": "some text"})
        assert both.isError and "either id or text" in both.content[0].text


async def test_api_keys_guard_mcp_as_they_guard_rest(service: ServiceFactory) -> None:
    base = service({"api.keys": "mcp-key-1"})
    response = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    assert response.json()["content"]["label"].endswith("Unauthorized")
    assert "mcp-key-1" not in response.text
    with pytest.raises(Exception):  # noqa: B017 (the SDK's own error for an HTTP 401)
        async with http_session(base, {"X-API-Key": "wrong"}) as session:
            await session.list_tools()
    async with http_session(base, {"X-API-Key": "mcp-key-1"}) as session:
        assert (await session.list_tools()).tools


@pytest.fixture
def secured(service: ServiceFactory, solr_url: str) -> Iterator[str]:
    """The service with security on, over the ACL documents (removed after the test: other
    tests' searches must not find them)."""
    admin = service()
    response = httpx.post(
        f"{admin}/documents",
        json={"documents": ACL_DOCUMENTS},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=60,
    )
    response.raise_for_status()
    try:
        yield service({"security.enabled": True, "retrieval.method": "bm25"})
    finally:
        remove_documents(solr_url, [document["id"] for document in ACL_DOCUMENTS])


async def test_an_mcp_client_sees_what_the_same_user_sees_over_rest(
    secured: str, llm: LLMScript
) -> None:
    team_a = {"X-User-Groups": "team-a"}
    rest = httpx.post(
        f"{secured}/ai/rag",
        json={"query": "jam recipe bergamot quince"},
        headers=team_a,
        timeout=60,
    )
    rest_ids = {d["id"] for d in rest.json()["content"]["documents"]}
    async with http_session(secured, team_a) as session:
        found = result_of(
            await session.call_tool("search", {"query": "jam recipe bergamot quince"})
        )
        answered = result_of(
            await session.call_tool("ask", {"question": "jam recipe bergamot quince"})
        )
        hidden = await session.call_tool("get_document", {"id": "mcp-acl-b"})
        hidden_resource = await session.read_resource("solr-rag://doc/mcp-acl-a")
    found_ids = {source["id"] for source in found["sources"]}
    asked_ids = {source["id"] for source in answered["sources"]}
    assert "mcp-acl-a" in found_ids and "mcp-acl-b" not in found_ids
    assert asked_ids == rest_ids and "mcp-acl-b" not in asked_ids
    assert hidden.isError and "not visible" in hidden.content[0].text
    assert "quince" in hidden_resource.contents[0].text
    for secret in SECRETS:
        assert secret not in json.dumps(found) + json.dumps(answered) + str(hidden.content)
        assert all(secret not in str(request.body) for request in llm.requests)
    async with http_session(secured, {"X-User-Groups": "team-b"}) as session:
        theirs = result_of(await session.call_tool("get_document", {"id": "mcp-acl-b"}))
    assert "bergamot-zq" in theirs["content"]


async def test_the_llm_call_budget_holds_for_mcp(service: ServiceFactory, llm: LLMScript) -> None:
    base = service({"llm.max.calls.per.request": 1, "chat.query.rewriting.enabled": True})
    async with http_session(base) as session:
        result_of(await session.call_tool("ask", {"question": QUESTION}))
    assert len(llm.requests) == 1  # rewriting left out: the one call is the answer's


@asynccontextmanager
async def stdio_session(config: Path, *groups: str) -> AsyncIterator[ClientSession]:
    arguments = ["-m", "service.cli", "mcp", "--config", str(config)]
    if groups:
        arguments += ["--groups", ",".join(groups)]
    parameters = StdioServerParameters(command=sys.executable, args=arguments)
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_stdio_serves_the_same_tools_with_the_groups_it_was_given(
    tmp_path: Path, base_properties: dict[str, object], secured: str, llm: LLMScript
) -> None:
    config = write_properties(
        tmp_path / "mcp.properties",
        {**base_properties, "security.enabled": True, "retrieval.method": "bm25"},
    )
    async with stdio_session(config, "team-a") as session:
        found = result_of(
            await session.call_tool("search", {"query": "jam recipe bergamot quince"})
        )
        answered = result_of(await session.call_tool("ask", {"question": QUESTION}))
    ids = {source["id"] for source in found["sources"]}
    assert "mcp-acl-a" in ids and "mcp-acl-b" not in ids
    assert answered["answer"].startswith(f"Test answer to: {QUESTION} It says:")
    async with stdio_session(config) as session:  # no groups: public documents only
        found = result_of(
            await session.call_tool("search", {"query": "jam recipe bergamot quince"})
        )
    assert not {source["id"] for source in found["sources"]} & {"mcp-acl-a", "mcp-acl-b"}


def test_stdio_refuses_bad_groups_in_one_line(tmp_path: Path, base_properties: dict) -> None:
    import subprocess

    config = write_properties(
        tmp_path / "mcp.properties", {**base_properties, "security.enabled": True}
    )
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "mcp", "--config", str(config), "--groups", "a b<"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("solr-rag: --groups must list")
    assert "Traceback" not in done.stderr


async def test_a_langchain_agent_searches_then_asks(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """LangChain's MCP adapters turn the tools into LangChain tools; the loop searches, then
    asks about the first document found, as an agent's plan would."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    base = service({"retrieval.method": "bm25"})
    client = MultiServerMCPClient(
        {"solr-rag": {"url": f"{base}/mcp", "transport": "streamable_http"}}
    )
    tools = {tool.name: tool for tool in await client.get_tools()}
    assert {"search", "ask"} <= set(tools)
    found = await tools["search"].ainvoke({"query": "lighthouse lamp", "top_k": 2})
    first = _structured(found)["sources"][0]
    answered = _structured(await tools["ask"].ainvoke({"question": QUESTION, "id": first["id"]}))
    assert first["id"] == "lighthouse"
    assert answered["answer"].endswith("[1]") and answered["sources"][0]["id"] == "lighthouse"


def _structured(result: Any) -> dict[str, Any]:
    """A LangChain tool's result: the JSON text of the MCP result (a string, or content blocks
    holding it), as the adapters' versions return it."""
    if isinstance(result, tuple):
        result = result[0]
    if isinstance(result, list):
        result = next(block["text"] for block in result if block.get("type") == "text")
    return json.loads(result)


def test_mcp_in_openapi_is_left_out_but_answers_bad_bodies_in_4xx(service: ServiceFactory) -> None:
    base = service()
    assert "/mcp" not in httpx.get(f"{base}/openapi.json").json()["paths"]
    ids = [b'{"a": 1}', b"true", b"1.5", b"null", b"[]"]  # passed as notifications: a 202
    wrong_ids = [b'{"jsonrpc": "2.0", "method": "ping", "id": ' + i + b"}" for i in ids]
    bodies = [b"{", b"[1, 2]", b'{"jsonrpc": "2.0"}', *wrong_ids]
    for body, code in zip(bodies, [-32700] + [-32600] * (len(bodies) - 1), strict=True):
        response = httpx.post(
            f"{base}/mcp",
            content=body,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
        )
        assert response.status_code == 400, (body, response.status_code, response.text)
        # JSON-RPC's own error, in words that say the fix (not pydantic's report of the input)
        error = response.json()["error"]
        assert error["code"] == code and response.json()["id"] is None, response.text
        assert "pydantic" not in error["message"] and "input_value" not in error["message"]


def test_an_unknown_method_is_method_not_found_with_its_id(
    service: ServiceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """JSON-RPC's -32601 names the method and answers the request's own id (the SDK answered
    -32602, "invalid request parameters", for a method it does not know); a known method's
    bad params are -32602 saying which, and neither costs the log a warning of every request
    type's errors (the SDK's, about 5 KB a message)."""
    base = service()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for method in ("tools/explode", "", "resources/list/"):
        request = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {}}
        response = httpx.post(f"{base}/mcp", json=request, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["id"] == 7 and body["error"]["code"] == -32601, body
        assert repr(method) in body["error"]["message"] and "tools/call" in body["error"]["message"]
    bad = {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": 5}}
    body = httpx.post(f"{base}/mcp", json=bad, headers=headers).json()
    assert body["id"] == "b" and body["error"]["code"] == -32602, body
    assert "params.name" in body["error"]["message"], body
    for method in ("tools/explode", "notifications/progress"):  # unknown; its params wrong
        noise = {"jsonrpc": "2.0", "method": method, "params": {"x": "A" * 60_000}}
        assert httpx.post(f"{base}/mcp", json=noise, headers=headers).status_code == 202
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text[:2000]
    # a response (the client answering the server) has no method: not refused as one
    answer = {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert httpx.post(f"{base}/mcp", json=answer, headers=headers).status_code == 202
    # a known method still reaches the SDK
    ping = {"jsonrpc": "2.0", "id": "p", "method": "ping"}
    assert httpx.post(f"{base}/mcp", json=ping, headers=headers).json() == {
        "jsonrpc": "2.0", "id": "p", "result": {}}  # fmt: skip


async def test_a_document_whose_id_holds_slashes_is_a_resource_too(
    service: ServiceFactory, solr_url: str
) -> None:
    """Every folder and upload id holds `/`: solr-rag://doc/{id} reads them, as they are or
    percent-encoded (the SDK's own template matching stopped at the first /)."""
    base = service()
    nested = {"id": "mcp-share/deep/notes.txt", "title": "Notes", "content": "Kelp grows fast."}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    httpx.post(f"{base}/documents", json={"documents": [nested]}, headers=admin).raise_for_status()
    try:
        async with http_session(base) as session:
            for uri in ("solr-rag://doc/mcp-share/deep/notes.txt",
                        "solr-rag://doc/mcp-share%2Fdeep%2Fnotes.txt"):  # fmt: skip
                resource = await session.read_resource(uri)
                assert resource.contents[0].text == "Kelp grows fast.", uri
    finally:
        remove_documents(solr_url, [nested["id"]])


def test_hostile_bodies_and_methods_get_the_rest_apis_answers(service: ServiceFactory) -> None:
    """JSON nested 100,000 deep is a 400 (the SDK's parser recursed into a 500), GET and
    DELETE are an immediate 405 naming POST (they waited 30 s for a 408)."""
    base = service()
    with httpx.Client(timeout=20) as http:
        deep = http.post(
            f"{base}/mcp",
            content=b"[" * 100_000,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
        )
        assert deep.status_code == 400 and "nested too deep" in deep.json()["content"]["reason"]
        for method in ("GET", "DELETE"):
            refused = http.request(method, f"{base}/mcp", headers={"Accept": "text/event-stream"})
            assert refused.status_code == 405 and refused.headers["Allow"] == "POST", refused.text
