"""Issue 67: one answer, every protocol. The answer's fields are built once and each wire
format carries what it has room for: why it abstained and what the LLM's token probabilities
say of it, whole and streamed, on /ai/rag (Datafari 6.2), /ai and /ai/stream (Datafari 7),
/v1/chat/completions (OpenAI) and the MCP server's `ask`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.chains.prompts import NOT_FOUND_SENTENCES
from testing.llm_server import LLMScript, Step
from testing.service import ServiceFactory
from tests.service.test_mcp import http_session, result_of
from tests.service.test_streaming import read_events

QUESTION = "When was the lighthouse lamp electrified?"
ECHO = "the answer only restated the question"
ECHOED = "The lighthouse lamp was electrified when it was electrified. [1]"  # says nothing
DOUBTFUL = {"I": 0.45, "The": 0.40, "It": 0.15}  # the not-found sentence's first token: 0.45
ANSWER = "It was electrified in 1952, when it stopped burning paraffin [1]."


def _ai_rag(client: TestClient, stream: bool) -> dict[str, Any]:
    body = {"query": QUESTION, "stream": stream}
    if not stream:
        answer = client.post("/ai/rag", json=body).json()
        return {**answer, "message": answer["content"]["message"]}
    with client.stream("POST", "/ai/rag", json=body) as response:
        return dict(read_events(response))["done"]


def _ai(client: TestClient, stream: bool) -> dict[str, Any]:
    if not stream:
        answer = client.post("/ai", json={"query": QUESTION}).json()
        return {**answer, "message": answer["content"]["message"]}
    with client.stream("POST", "/ai/stream", json={"query": QUESTION}) as response:
        events = [json.loads(line) for line in response.iter_lines() if line]
    final = next(e["data"] for e in events if e["type"] == "message.final")
    assert events[-1] == {**events[-1], "type": "stream.completed", "data": {"status": "OK"}}
    return {**final, "message": final["text"]}


def _openai(client: TestClient, stream: bool) -> dict[str, Any]:
    body = {"model": "rag", "messages": [{"role": "user", "content": QUESTION}]}
    if not stream:
        answer = client.post("/v1/chat/completions", json=body).json()
        return {**answer, "message": answer["choices"][0]["message"]["content"]}
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
        lines = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return {**chunks[-1], "message": text}


PROTOCOLS = {"ai/rag": _ai_rag, "ai": _ai, "v1": _openai}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_says_why_it_abstained(
    client: TestClient, llm: LLMScript, protocol: str, stream: bool
) -> None:
    llm.then(Step(content=ECHOED))
    answer = PROTOCOLS[protocol](client, stream)
    assert answer["abstained"].startswith(ECHO), answer
    assert answer["message"].startswith(NOT_FOUND_SENTENCES["en"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_every_protocol_reports_the_models_confidence(
    client: TestClient, llm: LLMScript, protocol: str, stream: bool
) -> None:
    llm.then(Step(content=ANSWER, first_top=DOUBTFUL))
    answer = PROTOCOLS[protocol](client, stream)
    assert answer["confidence"]["not_found"] == 0.45, answer
    assert answer["confidence"]["signal"].startswith("not_found")
    assert not answer.get("abstained")  # reported only: no threshold is set
    assert "1952" in answer["message"]


async def test_the_mcp_ask_tool_says_why_and_how_sure(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"retrieval.method": "bm25"})
    async with http_session(base) as session:
        llm.then(Step(content=ECHOED))
        refused = result_of(await session.call_tool("ask", {"question": QUESTION}))
        llm.then(Step(content=ANSWER, first_top=DOUBTFUL))
        answered = result_of(await session.call_tool("ask", {"question": QUESTION}))
    assert refused["abstained"].startswith(ECHO) and refused["sources"] == []
    assert answered["abstained"] is None and "1952" in answered["answer"]
    assert answered["confidence"]["not_found"] == 0.45
