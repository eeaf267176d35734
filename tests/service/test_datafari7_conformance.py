"""Conformance with Datafari 7's AI API, from its catalogue (francelabs/datafari:
ai/stream/ChatStream.java names the events and their fields, NdjsonChatStream.java the line,
rest/v2_0/ai/AiPowered.java the order, the statuses and the validation stream, ai/dto/ApiError
the labels): every line of every action's stream, on the real service, the real Solr and the
recording LLM, is checked against the table below, written down from their code, and /ai's
status for each kind of error. A client written against those events reads ours without a
special case."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript, Step
from testing.service import ClientFactory
from tests.service.test_datafari7 import AGENTIC, NOT_THERE, tool_call

# ChatStream's events: the fields Datafari always writes in `data` (optional ones apart)
EVENTS: dict[str, set[str]] = {
    "stream.started": set(),
    "memory": {"memoryId"},
    "phase": {"name"},
    "message.delta": {"text"},
    "thinking": {"text"},
    "tool.call": {"id", "toolName", "label"},
    "tool.result": {"id", "durationMs"},
    "tool.error": {"id", "durationMs", "error"},
    "sources.add": {"source"},
    "sources.final": {"items"},
    "search.results": {"docs"},
    "message.final": {"text"},
    "conversation": {"conversationId", "title"},
    "error": {"code", "label", "message", "reason"},
    "stream.completed": {"status"},
}
SOURCE = {"id", "title", "url", "content"}  # a source as SourcesAccumulator writes it
WORKING = r"(phase|message\.delta|thinking|tool\.call|tool\.result|tool\.error) "
# AiPowered's order: an answer, a failure once the turn began, a body refused at once
ANSWERED = re.compile(
    rf"^stream\.started memory phase:service\.started ({WORKING})*(sources\.add )*"
    r"(search\.results )?sources\.final (message\.final )?(conversation )?phase:service:done "
    r"stream\.completed:OK $"
)
FAILED = re.compile(
    rf"^stream\.started (memory phase:service\.started ({WORKING})*)?error "
    r"(sources\.final phase:service:done )?stream\.completed:ERROR $"
)
RAG = {"query": "When was the lighthouse lamp electrified?", "action": "rag", "history": []}


def conforming(text: str) -> list[dict]:
    """Every line of a stream checked against the table; the events, in order."""
    sent = []
    for line in text.splitlines():
        event = json.loads(line)
        assert set(event) == {"type", "data", "ts"}, line
        assert isinstance(event["ts"], int) and event["ts"] > 1_600_000_000_000, line
        kind, data = event["type"], event["data"]
        assert kind in EVENTS, f"{kind} is not one of Datafari 7's events"
        assert EVENTS[kind] <= set(data), f"{kind} lacks {EVENTS[kind] - set(data)}"
        for field in EVENTS[kind] - {"durationMs", "source", "items", "docs"}:
            assert isinstance(data[field], str), (kind, field)
        if kind.startswith("tool.") and kind != "tool.call":
            assert isinstance(data["durationMs"], int)
        for source in [data["source"]] if kind == "sources.add" else data.get("items", []):
            assert set(source) >= SOURCE and all(isinstance(source[k], str) for k in SOURCE)
            assert len(source["content"]) <= 201
        sent.append(event)
    return sent


def shape(sent: list[dict]) -> str:
    """The stream's events as one line: phase:NAME for the first and last phases, status."""
    words = []
    for event in sent:
        kind, data = event["type"], event["data"]
        if kind == "phase" and data["name"] in ("service.started", "service:done"):
            kind = f"phase:{data['name']}"
        elif kind == "stream.completed":
            kind = f"stream.completed:{data['status']}"
        words.append(kind)
    return " ".join(words) + " "


def stream(client: TestClient, body: dict) -> list[dict]:
    response = client.post("/ai/stream", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache, no-transform"
    assert response.headers["x-accel-buffering"] == "no"
    return conforming(response.text)


@pytest.fixture
def everything(make_client: ClientFactory) -> TestClient:
    """Every action on, a keyed caller (who owns conversations and memories)."""
    client = make_client({**AGENTIC, "ai.enable.summarization": True,
                          "conversations.enabled": True,
                          "api.keys": "conformance-key"})  # fmt: skip
    client.headers["X-API-Key"] = "conformance-key"
    return client


def test_every_action_streams_datafari_7s_events_in_their_order(
    everything: TestClient, llm: LLMScript
) -> None:
    rag = stream(everything, RAG)
    assert ANSWERED.match(shape(rag)), shape(rag)
    assert [e["data"]["name"] for e in rag if e["type"] == "phase"][1:3] == [
        "Rag:retrieval", "Rag:response generation"]  # fmt: skip
    summary = stream(everything, {"action": "summarize", "id": "lighthouse"})
    assert ANSWERED.match(shape(summary)), shape(summary)
    # its first search's answer abstains (issue 83): the LLM's tools run, then the answer
    llm.then(NOT_THERE, tool_call("bm25Search", query="apple orchard"))
    llm.answer = lambda request: "The keeper kept it lit [1]."
    agentic = stream(everything, {**RAG, "action": "agentic", "agent": "generic"})
    assert ANSWERED.match(shape(agentic)), shape(agentic)
    assert "tool.call tool.result" in shape(agentic)
    llm.answer = lambda request: "Both speak of upkeep: the lamp [1], the trees [2]."
    three = {"id": ["lighthouse", "orchard", "gone"]}  # one of them not there: left out
    synthesis = stream(everything, {"action": "synthesize", "filters": three})
    assert ANSWERED.match(shape(synthesis)), shape(synthesis)
    phases = [e["data"]["name"] for e in synthesis if e["type"] == "phase"]
    assert phases[1] == "synthesis:start" and "synthesis:summary generation (3/3)" in phases
    written = next(e["data"] for e in synthesis if e["type"] == "message.final")
    assert written["text"].startswith("Both speak of upkeep")
    cited = [e["data"]["source"] for e in synthesis if e["type"] == "sources.add"]
    assert [(s["id"], s["cited"]) for s in cited] == [("lighthouse", True), ("orchard", True)]
    asked = llm.requests[-1].prompt
    assert "[1] The lighthouse keeper" in asked and "[2] Pruning an apple orchard" in asked
    search = stream(everything, {"query": "lighthouse keeper", "action": "search"})
    assert ANSWERED.match(shape(search)), shape(search)
    assert "message.final" not in shape(search)  # Datafari's search writes no message
    # Datafari's SearchService: phase search:start, the documents as search.results {docs}
    # and as content.docs, one source a document (hybrid reads passages: several a document)
    assert [e["data"]["name"] for e in search if e["type"] == "phase"][1] == "search:start"
    (results,) = [e["data"]["docs"] for e in search if e["type"] == "search.results"]
    assert results and all(set(d) == {"docId", "title", "url", "content"} for d in results)
    assert all(len(d["content"]) <= 300 for d in results)
    listed = next(e["data"]["items"] for e in search if e["type"] == "sources.final")
    assert [s["id"] for s in listed] == [d["docId"] for d in results]
    assert len({s["id"] for s in listed}) == len(listed)
    whole = everything.post("/ai", json={"query": "lighthouse keeper", "action": "search"})
    assert whole.json()["content"]["docs"] == results
    summary_phases = [e["data"]["name"] for e in summary if e["type"] == "phase"]
    assert summary_phases[1:3] == ["summarize:start", "summarize:document retrieval"]
    # the memory and the conversation a stream names are the ones a next request continues
    memory = next(e["data"]["memoryId"] for e in rag if e["type"] == "memory")
    conversation = next(e["data"] for e in rag if e["type"] == "conversation")
    assert conversation["title"] == RAG["query"][:50]
    follow = {**RAG, "query": "Who kept the lighthouse?", "history": None, "memoryId": memory,
              "conversationId": conversation["conversationId"]}  # fmt: skip
    again = stream(everything, follow)
    assert ANSWERED.match(shape(again))
    assert next(e["data"]["memoryId"] for e in again if e["type"] == "memory") == memory
    assert RAG["query"] in str(llm.requests[-1].body)  # the conversation's earlier turn


@pytest.mark.parametrize(
    ("settings", "body", "step", "code", "label"),
    [
        ({"ai.enable.rag": False}, RAG, None, "422", "ragErrorNotEnabled"),
        ({}, {"action": "summarize", "id": "lighthouse"}, None, "422",
         "summarizationErrorNotEnabled"),
        ({}, {**RAG, "action": "agentic"}, None, "422", "agenticErrorNotEnabled"),
        ({}, {**RAG, "filters": {"id": ["no-such-document"]}}, None, "428", "ragNoFileFound"),
        ({}, {**RAG, "id": "no-such-document"}, None, "428", "ragFileNotFound"),
        ({}, RAG, Step(status=500), "500", "ragTechnicalError"),
        ({"ai.enable.summarization": True}, {"action": "synthesize", "filters": {"id": ["gone"]}},
         None, "422", "synthesisNoFileContent"),
        ({}, {"action": "synthesize", "filters": {"id": ["lighthouse"]}}, None, "422",
         "synthesisErrorNotEnabled"),
    ],
)  # fmt: skip
def test_each_error_kind_has_datafari_s_code_on_both_and_a_200(
    make_client: ClientFactory,
    llm: LLMScript,
    settings: dict,
    body: dict,
    step: Step | None,
    code: str,
    label: str,
) -> None:
    client = make_client(settings)
    if step:
        llm.then(step)
    whole = client.post("/ai", json=body)
    assert whole.status_code == 200, whole.text  # Datafari's client throws on 4xx/5xx
    envelope = whole.json()
    assert envelope["status"] == "ERROR"
    error = envelope["content"]["error"]
    assert (error["code"], error["label"]) == (code, label)
    assert error["message"] and "Traceback" not in whole.text
    if step:
        llm.then(step)
    sent = stream(client, body)
    assert FAILED.match(shape(sent)), shape(sent)
    streamed = next(e["data"] for e in sent if e["type"] == "error")
    assert (streamed["code"], streamed["label"]) == (code, label)


def test_a_body_refused_is_a_400_whole_and_a_200_stream(client: TestClient, llm: LLMScript) -> None:
    for body in ({"action": "rag"}, {"action": "summarize"}, {"query": "x", "action": "nope"},
                 {"action": "synthesize", "filters": {"id": []}}):  # fmt: skip
        whole = client.post("/ai", json=body)
        assert whole.status_code == 400
        assert whole.json()["content"]["error"]["label"] == "aiBadRequest"
        sent = stream(client, body)
        assert shape(sent) == "stream.started error stream.completed:ERROR "
    assert llm.requests == []


def test_auth_and_the_caller_s_cap_stay_http_errors(make_client: ClientFactory) -> None:
    client = make_client({"api.keys": "the-key"})
    assert client.post("/ai", json=RAG).status_code == 401
    assert client.post("/ai/stream", json=RAG).status_code == 401
