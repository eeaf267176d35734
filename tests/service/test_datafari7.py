"""Datafari 7's AI API (issues 47, 58): POST /ai and /ai/stream with the bodies its chat bot
sends, answered with its statuses and its stream's events (test_datafari7_conformance.py checks
every line against their catalogue), filters that narrow and never widen, hostile filter
queries refused, conversations kept per caller, agents by Datafari's names."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.chains.prompts import NOT_FOUND_SENTENCES
from service.errors import ConfigError, FilterRefused
from testing.llm_server import LLMScript, RecordedRequest, Step
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory
from tests.service.test_security import DOCUMENTS, assert_no_secret

KEY = "datafari7-owner-key"  # conversations and memories are kept for an owner: a keyed caller
KEYED = {"X-API-Key": KEY}
PREFIX = "/Datafari/rest/v2.0"
QUESTION = "When was the lighthouse lamp electrified?"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# what Datafari 7's chat bot sends for each action (AiRequest: its fields, "" for none)
RAG_BODY = {
    "query": QUESTION,
    "action": "rag",
    "id": "",
    "agent": "",
    "lang": "en",
    "history": [
        {"role": "user", "message": "Hello"},
        {"role": "assistant", "message": "Hello! Ask me about the documents."},
    ],
    "filters": {"id": [], "fq": []},
    "conversationId": "",
}
SUMMARIZE_BODY = {"action": "summarize", "id": "lighthouse", "lang": "en", "history": []}


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "OK"
    return body["content"]


def _timed_out(response: httpx.Response) -> None:
    """Datafari's error envelope of a request past its request.timeout."""
    late = response.json()
    assert late["status"] == "ERROR" and "timeout" in late["content"]["error"]["reason"], late


def error_of(response: httpx.Response, code: str, label: str, status: int = 200) -> dict:
    """Datafari 7's error envelope: content.error with Datafari's code, and the 6.2 fields
    beside it; a service error is an HTTP 200, as Datafari answers it."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "ERROR"
    error = body["content"]["error"]
    assert (error["code"], error["label"]) == (code, label)
    assert error["message"] and body["content"]["message"] == error["message"]
    assert body["content"]["label"] == label and body["content"]["documents"] == []
    assert "Traceback" not in response.text
    return error


def events(lines: list[str]) -> list[dict]:
    """The stream as Datafari's client reads it: each line one {type, data, ts} object."""
    assert lines and all(line.strip() for line in lines)
    sent = [json.loads(line) for line in lines]
    assert all(set(event) == {"type", "data", "ts"} for event in sent)
    return sent


def of_type(sent: list[dict], kind: str) -> list[dict]:
    return [event["data"] for event in sent if event["type"] == kind]


@pytest.fixture
def summarizing(make_client: ClientFactory) -> TestClient:
    return make_client({"ai.enable.summarization": True})


def test_each_action_answers_datafari_7s_body_on_both_paths(
    summarizing: TestClient, llm: LLMScript
) -> None:
    for path in ("/ai", f"{PREFIX}/ai"):
        answer = ok(summarizing.post(path, json=RAG_BODY))
        assert answer["message"].startswith("Test answer to:")
        assert answer["documents"][0]["id"] == "lighthouse"
        assert [s["id"] for s in answer["sources"]] == [d["id"] for d in answer["documents"]]
        assert all(len(s["content"]) <= 201 for s in answer["sources"])  # Datafari's 200 + …
        assert "conversationId" not in answer  # conversations are off here: null, left out
        # an anonymous caller owns nothing: no memory kept, and the answer says so
        assert "memoryId" not in answer and "anonymous" in answer["notKept"]
        summary = ok(summarizing.post(path, json=SUMMARIZE_BODY))
        assert summary["message"] and summary["documents"][0]["id"] == "lighthouse"
    assert len(llm.requests) == 4
    # Datafari 7 writes an earlier message's text as "message": it reached the LLM
    # the history is Datafari's (read with chat.memory.enabled, off here, as on /ai/rag)
    assert "Hello! Ask me about the documents." not in str(llm.requests[0].body)


def test_a_posted_history_in_datafari_7s_words_reaches_the_llm(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"chat.memory.enabled": True})
    ok(client.post("/ai", json=RAG_BODY))
    assert "Hello! Ask me about the documents." in str(llm.requests[-1].body)


def test_the_6_2_paths_keep_working_beside_them(summarizing: TestClient, llm: LLMScript) -> None:
    assert ok(summarizing.post("/ai/rag", json={"query": QUESTION}))["documents"]
    assert ok(summarizing.post(f"{PREFIX}/ai/summarize", json={"id": "lighthouse"}))["message"]


def test_datafari_7s_compatibility_routes_by_datafari_api_version(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    seven = make_client({"ai.enable.summarization": True, "datafari.api.version": "7",
                         **AGENTIC, "api.keys": KEY})  # fmt: skip
    seven.headers.update(KEYED)  # a keyed caller: its memory is kept
    answer = ok(seven.post(f"{PREFIX}/ai/rag", json={"query": QUESTION, "history": []}))
    assert answer["memoryId"] and answer["sources"][0]["id"] == "lighthouse"  # 7's envelope
    summary = ok(seven.post(f"{PREFIX}/ai/summarize", json={"id": "lighthouse"}))
    assert summary["message"] and summary["sources"][0]["id"] == "lighthouse"
    error_of(seven.post(f"{PREFIX}/ai/rag", json={"query": QUESTION, "id": "nope"}), "428",
             "ragFileNotFound")  # fmt: skip
    refused = seven.post(f"{PREFIX}/ai/rag", json={"history": []})
    assert refused.status_code == 400 and "aiBadRequest" in refused.text
    llm.answer = lambda request: "The keeper [1]."
    agent = ok(seven.post(f"{PREFIX}/ai/agentic", json={"query": QUESTION}))
    assert agent["message"] == "The keeper [1]."
    # our own /ai/rag keeps 6.2's RagAPI, and so does Datafari's path by default
    assert "memoryId" not in ok(seven.post("/ai/rag", json={"query": QUESTION}))
    six = make_client()
    assert "memoryId" not in ok(six.post(f"{PREFIX}/ai/rag", json={"query": QUESTION}))


@pytest.mark.parametrize(
    ("body", "label", "why"),
    [
        ({"action": "rag"}, "aiBadRequest", "query is required for rag"),
        ({"action": "summarize", "query": "x"}, "aiBadRequest", "id is required for summarize"),
        ({"action": "synthesize", "query": "x"}, "aiBadRequest", "filters.id"),
        ({"action": "translate", "query": "x"}, "aiBadRequest", "action"),
        ({"query": "x", "filters": {"fq": ["{!join from=id to=id}x:y"]}}, "aiBadRequest",
         "local parameters"),
        ({"query": "x", "conversationId": "a" * 129}, "aiBadRequest", "conversationId"),
        ({"query": "x", "memoryId": "a" * 129}, "aiBadRequest", "memoryId"),
        ({"query": "x", "filters": {"fq": ["language:en"] * 21}}, "aiBadRequest", "fq"),
        ({"query": "x", "filters": {"id": ["a"] * 1001}}, "aiBadRequest", "filters.id"),
        ({"query": "x", "filters": {"id": ["a\u0000b"]}}, "aiBadRequest", "filters.id"),
        ({"query": "x", "id": "a\nb"}, "aiBadRequest", "id"),
        ({"query": "x", "agent": "a" * 513}, "aiBadRequest", "agent"),
        ({"query": "x" * 20_001}, "aiBadRequest", "query"),
    ],
)  # fmt: skip
def test_what_an_action_lacks_is_a_400_that_says_it(
    client: TestClient, llm: LLMScript, body: dict, label: str, why: str
) -> None:
    response = client.post("/ai", json=body)
    assert response.status_code == 400, response.text
    content = response.json()["content"]
    assert content["label"] == label and why in content["reason"]
    assert llm.requests == []


def test_errors_are_labelled_by_the_action_with_datafari_s_codes_in_a_200(
    client: TestClient, llm: LLMScript
) -> None:
    """Datafari's own Java client (RestClient.retrieve()) throws on a 4xx or 5xx before it
    reads content.error: a service error is a 200 whose status is ERROR."""
    error_of(client.post("/ai", json=SUMMARIZE_BODY), "422", "summarizationErrorNotEnabled")
    found = error_of(client.post("/ai", json={**RAG_BODY, "id": "no-such-doc"}), "428",
                     "ragFileNotFound")  # fmt: skip
    assert "no-such-doc" in found["reason"]


def test_the_stream_is_datafari_7s_ndjson_read_line_by_line(
    summarizing: TestClient, llm: LLMScript
) -> None:
    with summarizing.stream("POST", "/ai/stream", json=RAG_BODY) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache, no-transform"
        assert response.headers["x-accel-buffering"] == "no"
        lines = list(response.iter_lines())
    sent = events(lines)
    kinds = [event["type"] for event in sent]
    assert kinds[:3] == ["stream.started", "memory", "phase"]
    assert kinds[-4:] == ["sources.final", "message.final", "phase", "stream.completed"]
    phases = [data["name"] for data in of_type(sent, "phase")]
    assert phases == ["service.started", "Rag:retrieving chat history", "Rag:retrieval",
                      "Rag:response generation", "service:done"]  # fmt: skip
    text = "".join(data["text"] for data in of_type(sent, "message.delta"))
    final = of_type(sent, "message.final")[0]
    assert final["text"] == text and text.startswith("Test answer to:")
    assert final["timings"]["chain"] >= 0  # ours, beside theirs
    added = [data["source"]["id"] for data in of_type(sent, "sources.add")]
    assert added[0] == "lighthouse"
    assert [item["id"] for item in of_type(sent, "sources.final")[0]["items"]] == added
    assert of_type(sent, "stream.completed") == [{"status": "OK"}]
    summary = events(list(summarizing.post("/ai/stream", json=SUMMARIZE_BODY).iter_lines()))
    assert of_type(summary, "message.final")[0]["text"]
    assert of_type(summary, "stream.completed") == [{"status": "OK"}]


def test_a_failure_in_the_stream_is_an_error_then_its_end(
    client: TestClient, llm: LLMScript
) -> None:
    sent = events(list(client.post("/ai/stream", json={**RAG_BODY, "id": "nope"}).iter_lines()))
    kinds = [event["type"] for event in sent]
    assert kinds[0] == "stream.started"
    assert kinds[-4:] == ["error", "sources.final", "phase", "stream.completed"]
    error = of_type(sent, "error")[0]
    assert (error["code"], error["label"]) == ("428", "ragFileNotFound")
    assert of_type(sent, "stream.completed") == [{"status": "ERROR"}]


def test_a_body_that_fails_validation_is_a_200_stream_saying_so(
    client: TestClient, llm: LLMScript
) -> None:
    for body in ({"action": "rag"}, {"query": "x", "agent": "a" * 513}):
        response = client.post("/ai/stream", json=body)
        assert response.status_code == 200
        sent = events(list(response.iter_lines()))
        assert [event["type"] for event in sent] == ["stream.started", "error",
                                                     "stream.completed"]  # fmt: skip
        assert of_type(sent, "error")[0]["label"] == "aiBadRequest"
        assert of_type(sent, "stream.completed") == [{"status": "ERROR"}]
    # a filter refused once the turn began: its error, then the stream's end
    hostile = {"query": "x", "filters": {"fq": ["{!join from=id to=id}x:y"]}}
    sent = events(list(client.post("/ai/stream", json=hostile).iter_lines()))
    assert of_type(sent, "error")[0]["label"] == "aiBadRequest"
    assert sent[-1]["type"] == "stream.completed" and sent[-1]["data"]["status"] == "ERROR"
    refused = client.post("/ai/stream", content=b'{"query": NaN}',
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert refused.status_code == 200 and "stream.completed" in refused.text
    assert llm.requests == []


def test_a_client_that_leaves_mid_stream_frees_the_service(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service()
    with httpx.stream("POST", f"{base}/ai/stream", json=RAG_BODY, timeout=30) as response:
        for line in response.iter_lines():
            if json.loads(line)["type"] == "phase":
                break  # the chat bot's tab is closed
    answer = httpx.post(f"{base}/ai", json=RAG_BODY, timeout=30)
    assert ok(answer)["documents"][0]["id"] == "lighthouse"


def test_filters_id_narrow_what_the_answer_reads(client: TestClient, llm: LLMScript) -> None:
    narrowed = {**RAG_BODY, "query": "apple orchard lighthouse", "filters": {"id": ["orchard"]}}
    answer = ok(client.post("/ai", json=narrowed))
    assert {d["id"] for d in answer["documents"]} == {"orchard"}
    nothing = {**RAG_BODY, "filters": {"id": ["no-such-document"]}}
    error_of(client.post("/ai", json=nothing), "428", "ragNoFileFound")


@pytest.mark.parametrize("method", ["bm25", "vector", "hybrid"])
def test_filters_fq_narrow_by_a_facet_on_every_retrieval(
    make_client: ClientFactory, llm: LLMScript, method: str
) -> None:
    client = make_client({"retrieval.method": method})
    french = {
        **RAG_BODY,
        "query": "Marseille lighthouse summer",
        "filters": {"fq": ["language:fr"]},
    }
    answer = ok(client.post("/ai", json=french))
    assert {d["id"] for d in answer["documents"]} == {"marseille"}
    tagged = {**french, "filters": {"fq": ['{!tag=lang}language:("fr" OR de)']}}
    assert {d["id"] for d in ok(client.post("/ai", json=tagged))["documents"]} == {"marseille"}
    # Datafari passes any other key to Solr raw: ours reads it as a facet's filter on a field
    keyed = {**french, "filters": {"id": [], "fq": [], "language": ["fr", 'de"'], "x": "y"}}
    keyed["filters"].pop("x")
    assert {d["id"] for d in ok(client.post("/ai", json=keyed))["documents"]} == {"marseille"}


@pytest.mark.parametrize(
    ("filters", "why"),
    [
        ({"rows": ["100000"]}, "rows"),  # a Solr parameter, not a field
        ({"allowed_groups": ["team-b"]}, "security field"),
        ({"defType": ["func"]}, "defType"),
        ({"q": ["*:*"], "fl": ["*"]}, "q"),
        ({"x y": ["1"]}, "not a field name"),
        ({"language": []}, "one to 100 values"),
        ({f"field{n}": ["v"] for n in range(21)}, "at most 20 fields"),
    ],
)
def test_other_filter_keys_never_reach_solr_as_parameters(
    client: TestClient, llm: LLMScript, filters: dict, why: str
) -> None:
    body = {**RAG_BODY, "filters": filters}
    whole = client.post("/ai", json=body)
    assert whole.status_code == 400, whole.text
    assert why in whole.json()["content"]["reason"]
    sent = events(list(client.post("/ai/stream", json=body).iter_lines()))
    assert why in of_type(sent, "error")[0]["reason"]
    assert of_type(sent, "stream.completed") == [{"status": "ERROR"}]
    assert llm.requests == []


@pytest.mark.parametrize(
    "fq",
    [
        "{!join from=id to=id fromIndex=FileShare}allowed_groups:team-b",
        "{!func}sum(1,1)",
        "{!frange l=0 u=1}id",
        "title:${secret}",
        '_query_:"{!lucene}*:*"',
        "_val_:1",
        "allowed_groups:*",
        "allowed_groups:team-b",
        "content:bergam*",
        "content:bergamot~1",
        "*:*",
        "language:fr AND content:x",
        "no_such_field:x",
        "x" * 5000,
    ],
)
def test_hostile_filter_queries_are_each_refused(
    client: TestClient, llm: LLMScript, fq: str
) -> None:
    response = client.post("/ai", json={**RAG_BODY, "filters": {"fq": [fq]}})
    assert response.status_code == 400, response.text
    assert response.json()["content"]["label"] == "aiBadRequest"
    assert llm.requests == []


def test_filters_never_widen_what_a_group_sees(make_client: ClientFactory, llm: LLMScript) -> None:
    admin = make_client()
    admin.post("/documents", json={"documents": DOCUMENTS}, headers=AUTH).raise_for_status()
    secure = make_client({"security.enabled": True, "retrieval.method": "bm25"})
    team_a = {"X-User-Groups": "team-a"}
    for filters in (
        {"id": ["acl-b", "acl-ab-denied"]},
        {"fq": ["id:acl-b"]},
        {"fq": ["id:(acl-a OR acl-b)"], "id": ["acl-b"]},
    ):
        body = {**RAG_BODY, "query": "marmalade recipe bergamot", "filters": filters}
        response = secure.post("/ai", json=body, headers=team_a)
        assert response.status_code in (200, 428), response.text
        assert not {d["id"] for d in response.json()["content"]["documents"]} & {
            "acl-b",
            "acl-ab-denied",
        }
        assert_no_secret(response, llm)
    allowed = {**RAG_BODY, "query": "marmalade recipe", "filters": {"fq": ["id:(acl-a OR acl-b)"]}}
    answer = ok(secure.post("/ai", json=allowed, headers=team_a))
    assert {d["id"] for d in answer["documents"]} == {"acl-a"}


def test_a_conversation_is_kept_for_its_caller_only(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"conversations.enabled": True, "api.keys": "key-one,key-two"})
    one, two = {"X-API-Key": "key-one"}, {"X-API-Key": "key-two"}
    first = ok(client.post("/ai", json={"query": QUESTION}, headers=one))
    conversation = first["conversationId"]
    assert conversation and len(conversation) == 32
    follow_up = {"query": "And who kept the lighthouse?", "conversationId": conversation}
    second = ok(client.post("/ai", json=follow_up, headers=one))
    assert second["conversationId"] == conversation
    sent = str(llm.requests[-1].body)
    assert QUESTION in sent and first["message"][:30] in sent  # the earlier turn, as history
    # the other caller: its question is answered, in a conversation of its own; nothing of
    # the first caller's is read (as Datafari ignores a conversationId that is not yours)
    stolen = ok(client.post("/ai", json=follow_up, headers=two))
    assert stolen["conversationId"] not in (None, conversation)
    assert QUESTION not in str(llm.requests[-1].body) and QUESTION not in str(stolen)
    error_of(client.get(f"/ai/conversations/{conversation}", headers=two), "428",
             "ragConversationNotFound", status=404)  # fmt: skip
    error_of(client.delete(f"/ai/conversations/{conversation}", headers=two), "428",
             "ragConversationNotFound", status=404)  # fmt: skip
    kept = ok(client.get(f"/ai/conversations/{conversation}", headers=one))
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant"] * 2
    # its owner deletes it: gone, and a follow-up starts anew
    ok(client.delete(f"/ai/conversations/{conversation}", headers=one))
    anew = ok(client.post("/ai", json=follow_up, headers=one))
    assert anew["conversationId"] != conversation


def test_a_conversation_is_bounded(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"conversations.enabled": True, "api.keys": KEY,
                          "conversations.max.messages": 2,
                          "conversations.max.message.chars": 100})  # fmt: skip
    client.headers.update(KEYED)  # conversations are an owner's: a keyed caller
    conversation = ok(client.post("/ai", json={"query": "lighthouse " * 50}))["conversationId"]
    for question in ("orchard pruning", "lighthouse keeper"):
        ok(client.post("/ai", json={"query": question, "conversationId": conversation}))
    kept = ok(client.get(f"/ai/conversations/{conversation}"))["messages"]
    assert [m["role"] for m in kept] == ["user", "assistant"]
    assert kept[0]["content"] == "lighthouse keeper"  # the oldest messages dropped
    assert all(len(m["content"]) <= 100 for m in kept)
    first = ok(client.post("/ai", json={"query": "lighthouse " * 50}))["conversationId"]
    kept = ok(client.get(f"/ai/conversations/{first}"))["messages"]
    assert kept[0]["content"] == ("lighthouse " * 50)[:100]  # a message is cut


def test_a_conversation_id_never_made_here_is_ignored_and_the_question_answered(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"conversations.enabled": True, "api.keys": KEY})
    client.headers.update(KEYED)  # conversations are an owner's: a keyed caller
    for made_up in ("0" * 32, "../../etc/passwd", "*:*", "a" * 128):
        answer = ok(client.post("/ai", json={"query": QUESTION, "conversationId": made_up}))
        assert answer["conversationId"] != made_up and len(answer["conversationId"]) == 32
    assert len(llm.requests) == 4
    off = ok(make_client().post("/ai", json={"query": QUESTION, "conversationId": "0" * 32}))
    assert "conversationId" not in off  # conversations off: answered, none kept


def _last_turn(llm: LLMScript) -> RecordedRequest:
    """The agent's last tool-calling turn (rag's answer, without tools, comes after it)."""
    return [request for request in llm.requests if "tools" in request.body][-1]


def tool_call(name: str, **arguments: object) -> Step:
    """The LLM's turn that calls one tool, as OpenAI's tools API writes it."""
    call = {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}  # fmt: skip
    return Step(body=json.dumps(body))


AGENTIC = {"agentic.enabled": True, "agentic.max.steps": 3}
# issue 83: the agent's first step is the question searched as rag searches it, and rag's
# answer from what it found; only an answer that abstains lets the LLM's tool loop run. The
# loop's tests have that first answer abstain (the only request without tools it takes)
NOT_THERE = Step(content="I could not find it in the documents.",
                 takes=lambda request: "tools" not in request.body)  # fmt: skip
AGENT_BODY = {**RAG_BODY, "action": "agentic", "query": "Who kept the lighthouse lamp lit?"}
QUASAR = "Xylophone quasar?"  # a question the agent's first search finds nothing for


def test_the_agent_calls_our_tools_and_answers_citing_what_they_found(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(AGENTIC)
    llm.then(NOT_THERE, tool_call("search", query="apple orchard pruning"))
    llm.answer = lambda request: "The keeper kept it lit [1]."
    sent = events(list(client.post("/ai/stream", json=AGENT_BODY).iter_lines()))
    calls, results = of_type(sent, "tool.call"), of_type(sent, "tool.result")
    assert [c["toolName"] for c in calls] == ["search", "search"]  # its first step, the LLM's
    for call, result in zip(calls, results, strict=True):
        assert call["label"] and result["id"] == call["id"] and result["durationMs"] >= 0
    kinds = [event["type"] for event in sent]
    assert kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("message.final")
    assert of_type(sent, "message.final")[0]["text"] == "The keeper kept it lit [1]."
    first = of_type(sent, "sources.final")[0]["items"][0]
    assert (first["id"], first["cited"]) == ("lighthouse", True)
    assert of_type(sent, "stream.completed") == [{"status": "OK"}]
    # each tool's result went back to the LLM as a tool message, after its call
    messages = llm.requests[1].body["messages"]  # the first turn: the first search in it
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "search"
    assert messages[-1]["role"] == "tool" and "[1] The lighthouse keeper" in messages[-1]["content"]
    messages = llm.requests[2].body["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "search"
    assert messages[-1]["role"] == "tool" and "Pruning an apple orchard" in messages[-1]["content"]
    assert {t["function"]["name"] for t in llm.requests[1].body["tools"]} == {
        "search", "ask", "summarize", "get_document"}  # fmt: skip


def test_the_agents_answer_streams_as_datafari_s_and_never_a_tool_call_written_as_text(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 68, item 5: Datafari streams the agent's final answer as message.delta; the
    deltas joined are the answer kept (message.final), and a tool call the model wrote as text
    (small models do) is called, never shown."""
    client = make_client(AGENTIC)
    written = 'Let me look. {"name": "search", "arguments": {"query": "apple orchard"}}'
    llm.then(NOT_THERE, Step(content=written))
    llm.answer = lambda request: "The keeper kept it lit [1]. He lived by the lamp. The end."
    sent = events(list(client.post("/ai/stream", json=AGENT_BODY).iter_lines()))
    assert [d["toolName"] for d in of_type(sent, "tool.call")] == ["search", "search"]
    deltas = [data["text"] for data in of_type(sent, "message.delta")]
    (final,) = of_type(sent, "message.final")
    assert len(deltas) == 3 and "".join(deltas) == final["text"]
    assert final["text"] == "The keeper kept it lit [1]. He lived by the lamp. The end."
    assert not any("{" in delta or "Let me look" in delta for delta in deltas)
    kinds = [event["type"] for event in sent]
    assert kinds.index("tool.result") < kinds.index("message.delta")
    assert kinds.index("message.delta") < kinds.index("sources.final")
    # out of steps, the answer streams as the LLM writes it: rag's answer from what was read
    llm.reset()
    llm.then(NOT_THERE, *(tool_call("get_document", document="orchard") for _ in range(3)))
    llm.answer = lambda request: "Electrified in 1952 [1]. By the keeper."
    sent = events(list(client.post("/ai/stream", json=AGENT_BODY).iter_lines()))
    assert llm.requests[-1].body["stream"] is True and llm.requests[-1].stream_completed
    assert "Documents:" in llm.requests[-1].prompt  # rag's prompt, the document in it
    deltas = [data["text"] for data in of_type(sent, "message.delta")]
    assert len(deltas) > 1 and "".join(deltas) == "Electrified in 1952 [1]. By the keeper."
    assert of_type(sent, "message.final")[0]["text"] == "".join(deltas)
    # the whole answer (POST /ai) is the same text, nothing streamed
    llm.reset()
    llm.answer = lambda request: "The keeper kept it lit [1]."
    assert ok(client.post("/ai", json=AGENT_BODY))["message"] == "The keeper kept it lit [1]."


def test_an_agent_that_keeps_calling_tools_is_stopped_and_answers(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(AGENTIC)
    # it would call a tool at every turn: three turns are all it gets (agentic.max.steps)
    llm.then(NOT_THERE, *(tool_call("get_document", document="orchard") for _ in range(3)))
    llm.answer = lambda request: "From what I read: electrified in 1952 [1]."
    answer = ok(client.post("/ai", json=AGENT_BODY))
    assert answer["message"] == "From what I read: electrified in 1952 [1]."
    # the first answer, three tool-calling turns (agentic.max.steps), then rag's answer from
    # what was read
    assert len(llm.requests) == 5
    assert all("tools" in request.body for request in llm.requests[1:4])
    assert "tools" not in llm.requests[4].body
    assert "Documents:" in llm.requests[4].prompt and "Brannoch" in llm.requests[4].prompt
    assert "Apple trees" in llm.requests[4].prompt


def test_datafari_s_generic_agent_calls_its_tools_by_their_names(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Datafari's MCP client sends agent "generic" (and its UI may send "rag"): the agent
    offers Datafari's generic tools, each doing what Datafari's does, within the caller's
    rights."""
    client = make_client({**AGENTIC, "agentic.max.steps": 9, "llm.max.calls.per.request": 16})
    llm.then(
        NOT_THERE,
        tool_call("bm25Search", query="lighthouse lamp"),
        tool_call("hybridSearch", query="apple trees pruning"),
        tool_call("searchChunksFromADocument", documentId="lighthouse", query="fog horn"),
        tool_call("readNextChunks", documentId="1", part="0"),
        tool_call("ragByDocument", documentId="lighthouse", question="What did the lamp burn?"),
        Step(content="Paraffin, until 1952 [1]."),  # ragByDocument's own answer
        tool_call("readNextChunks", documentId="lighthouse"),  # a missing argument
        tool_call("entityExtraction", documentId="lighthouse", entities="dates"),
        Step(content="1952 [1]"),  # entityExtraction's own answer
    )
    llm.answer = lambda request: "It burned paraffin [1]."
    sent = events(list(client.post("/ai/stream", json={**AGENT_BODY, "agent": "generic"})
                       .iter_lines()))  # fmt: skip
    offered = {t["function"]["name"] for t in llm.requests[1].body["tools"]}
    assert offered == {"bm25Search", "hybridSearch", "ragByDocument", "entityExtraction",
                       "searchChunksFromADocument", "readNextChunks", "summarize"}  # fmt: skip
    called = [data["toolName"] for data in of_type(sent, "tool.call")]
    assert called == ["bm25Search", "bm25Search", "hybridSearch", "searchChunksFromADocument",
                      "readNextChunks", "ragByDocument", "readNextChunks",
                      "entityExtraction"]  # fmt: skip
    (failed,) = of_type(sent, "tool.error")
    assert "documentId, part" in failed["error"]
    first, *results = [m["content"] for m in _last_turn(llm).body["messages"]
                       if m["role"] == "tool"]  # fmt: skip
    assert "lighthouse" in first.lower()  # its own first search: the question
    assert "lighthouse" in results[0].lower()  # bm25Search
    assert "apple" in results[1].lower()  # hybridSearch
    assert "horn" in results[2].lower()  # the lighthouse's passage about the horn
    assert "(the end)" in results[3]  # the document's text, part 0: all of it
    assert "Paraffin" in results[4]  # ragByDocument: answered from that document only
    rag = next(r for r in llm.requests if "What did the lamp burn?" in r.prompt)
    assert "Brannoch" in rag.prompt and "Apple trees" not in rag.prompt
    assert "1952" in results[6]  # entityExtraction: asked of that document
    listed = next(r for r in llm.requests if "List the dates this document names" in r.prompt)
    assert "Brannoch" in listed.prompt and "Apple trees" not in listed.prompt
    assert of_type(sent, "message.final")[0]["text"] == "It burned paraffin [1]."
    # "rag" is not an agent here: Datafari's fallback, generic
    llm.reset()
    llm.then(NOT_THERE)
    llm.answer = lambda request: "The lamp [1]."
    ok(client.post("/ai", json={**AGENT_BODY, "agent": "rag"}))
    assert "bm25Search" in {t["function"]["name"] for t in llm.requests[1].body["tools"]}


def test_a_tool_argument_in_unicode_digits_is_a_tool_error_never_a_500(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 81, finding 4: str.isdigit() takes '²', int() does not. A part, or a document's
    number, written in other digits than 0-9 is the tool's error, told to the model."""
    client = make_client({**AGENTIC, "agentic.max.steps": 4})
    llm.then(
        NOT_THERE,  # its first search numbered the documents [1], [2]...
        tool_call("search", query="apple orchard"),  # ... and this one more of them
        tool_call("get_document", document="[³]"),
        tool_call("summarize", document="²"),
        tool_call("get_document", document="١"),  # an Arabic-Indic one
    )
    llm.answer = lambda request: "The keeper kept it lit [1]."
    assert ok(client.post("/ai", json=AGENT_BODY))["message"] == "The keeper kept it lit [1]."
    results = [m["content"] for m in _last_turn(llm).body["messages"] if m["role"] == "tool"]
    # numbered on from the first search's documents (how many it found depends on what else
    # the collection holds)
    first = [int(n) for n in re.findall(r"^\[(\d+)\] ", results[0], re.M)]
    assert first[0] == 1 and re.match(r"\[(\d+)\] Pruning", results[1]), results
    assert all(r.startswith("error: ") for r in results[2:]), results
    llm.reset()
    llm.then(
        NOT_THERE,
        tool_call("readNextChunks", documentId="orchard", part="²"),
        tool_call("readNextChunks", documentId="orchard", part="1²"),
        tool_call("readNextChunks", documentId="orchard", part="0"),
    )
    llm.answer = lambda request: "Paraffin [1]."
    answer = ok(client.post("/ai", json={**AGENT_BODY, "agent": "generic"}))
    assert answer["message"] == "Paraffin [1]."
    _, *results = [m["content"] for m in _last_turn(llm).body["messages"] if m["role"] == "tool"]
    assert [r.startswith("error: ") for r in results] == [True, True, False], results
    assert "0, 1, 2" in results[0] and "Apple trees" in results[2]


CUSTOM_TOOLS = [
    {
        "type": "solr-search",
        "name": "searchByLanguage",
        "label": "Searching one language's pages",
        "description": "Search the documents written in one language.",
        "parameters": {"lang": {"type": "string", "description": "ISO code", "required": True}},
        "properties": {"handler": "/select", "fq": ["language:{{lang}}"]},
    },
    {
        "type": "rag-by-document-template",
        "name": "datesOf",
        "description": "The dates one document gives.",
        "parameters": {"what": {"type": "string", "required": True}},
        "properties": {"template": "Which {{what}} does this document give?"},
    },
]


def test_the_custom_agent_reads_its_tools_from_agentic_custom_tools_json(
    make_client: ClientFactory, llm: LLMScript, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "agentic-custom-tools.json").write_text(json.dumps(CUSTOM_TOOLS))
    client = make_client({**AGENTIC, "agentic.max.steps": 5})
    llm.then(
        tool_call("searchByLanguage", q="Marseille lighthouse summer", lang="fr"),
        # an argument is one value, never syntax: the whole of it one language (issue 66)
        tool_call("searchByLanguage", q="lighthouse", lang="fr OR allowed_groups:*"),
        tool_call("datesOf", id="lighthouse", what="dates"),
        Step(content="1952 [1]."),  # datesOf's own answer
    )
    llm.answer = lambda request: "The lamp changed in 1952 [2]."
    sent = events(list(client.post("/ai/stream", json={**AGENT_BODY, "agent": "custom"})
                       .iter_lines()))  # fmt: skip
    offered = {t["function"]["name"] for t in llm.requests[0].body["tools"]}
    assert offered == {"searchByLanguage", "datesOf"}
    assert [d["toolName"] for d in of_type(sent, "tool.call")] == [
        "searchByLanguage", "searchByLanguage", "datesOf"]  # fmt: skip
    assert of_type(sent, "tool.error") == []
    results = [m["content"] for m in _last_turn(llm).body["messages"] if m["role"] == "tool"]
    assert "marseille" in results[0].lower() and "brannoch" not in results[0].lower()
    assert results[1] == "nothing found"  # no document's language is that whole argument
    asked = next(r for r in llm.requests if "Which dates does this document give?" in r.prompt)
    assert "Brannoch" in asked.prompt and "Marseille" not in asked.prompt
    # the tools are read with the config: a file broken while serving is refused as a broken
    # rag.properties is (logged), the last good tools serving on
    (tmp_path / "agentic-custom-tools.json").write_text(json.dumps([{"name": "x", "type": "y"}]))
    llm.reset()
    llm.answer = lambda request: "The lamp [1]."
    with caplog.at_level(logging.ERROR, logger="service.config.store"):
        ok(client.post("/ai", json={**AGENT_BODY, "agent": "custom"}))
    offered = {t["function"]["name"] for t in llm.requests[0].body["tools"]}
    assert offered == {"searchByLanguage", "datesOf"}
    assert "agentic-custom-tools.json cannot be used" in caplog.text and "tool x" in caplog.text
    # and a service does not start on it: the error names the file, the tool and the fix
    with pytest.raises(ConfigError, match=r"agentic-custom-tools\.json cannot be used: .*tool x.*"
                       r"Correct the file"):  # fmt: skip
        make_client(AGENTIC)


def test_the_call_budget_bounds_the_agent_too(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({**AGENTIC, "agentic.max.steps": 20, "llm.max.calls.per.request": 4})
    # the first answer abstains; then it calls a tool while the budget lets it (a 3rd turn
    # would take the answer's call) ...
    turn = tool_call("search", query="apple orchard")
    llm.then(NOT_THERE, *(replace(turn, takes=lambda r: "tools" in r.body) for _ in range(3)))
    llm.answer = lambda request: "The keeper [1]."
    assert ok(client.post("/ai", json=AGENT_BODY))["message"] == "The keeper [1]."
    # ... and rag's answer takes the last call
    assert len(llm.requests) == 4 and "tools" not in llm.requests[-1].body
    assert [("tools" in request.body) for request in llm.requests] == [False, True, True, False]


def test_the_agent_s_tools_never_spend_the_calls_kept_for_its_answer(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The ask tool runs rag (an LLM call of its own): it spent the call kept for the answer,
    and the question failed with TooManyCalls (a 400) once the tools had found documents."""
    # the first answer's call, a turn, the ask tool's own, the answer's: nothing to spare
    client = make_client({**AGENTIC, "llm.max.calls.per.request": 4})
    llm.then(NOT_THERE, tool_call("ask", question="When are apple trees pruned?"))
    llm.answer = lambda request: "Paraffin [1]."
    answer = ok(client.post("/ai", json=AGENT_BODY))
    assert answer["message"] == "Paraffin [1]."
    assert len(llm.requests) == 4 and "tools" not in llm.requests[-1].body
    assert llm.requests[-1].prompt.count("Who kept the lighthouse lamp lit?") >= 1


def test_a_model_that_cannot_call_tools_is_said_so(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(AGENTIC)
    refusal = {"error": {"message": "tools param requires --jinja flag", "type": "x"}}
    llm.then(NOT_THERE, Step(status=400, body=json.dumps(refusal)))  # the loop's first turn
    error = error_of(client.post("/ai", json=AGENT_BODY), "400", "aiBadRequest", status=400)
    assert "cannot call tools" in error["reason"] and "action=rag" in error["reason"]


def test_agents_are_named_in_rag_properties(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({**AGENTIC, "agentic.agents": "default=search;doc-42=get_document"})
    # a name not there (Datafari's generic and rag, or any): the first agent, as Datafari
    # falls back to its generic one
    for name in ("generic", "rag", "nope", None):
        llm.answer = lambda request: "The lamp [1]."
        ok(client.post("/ai", json={**AGENT_BODY, "agent": name}))
        assert [t["function"]["name"] for t in _last_turn(llm).body["tools"]] == ["search"]
    llm.reset()
    llm.then(tool_call("search", query="lighthouse"))
    llm.answer = lambda request: "I could not find it in the documents."
    ok(client.post("/ai", json={**AGENT_BODY, "agent": "doc-42"}))
    assert [t["function"]["name"] for t in llm.requests[0].body["tools"]] == ["get_document"]
    refused = llm.requests[1].body["messages"][-1]["content"]
    assert refused.startswith("error: no tool 'search'")  # not this agent's
    off = make_client().post("/ai", json=AGENT_BODY)
    error_of(off, "422", "agenticErrorNotEnabled")


def test_the_agent_reads_only_what_its_caller_may(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    admin = make_client()
    admin.post("/documents", json={"documents": DOCUMENTS}, headers=AUTH).raise_for_status()
    secure = make_client({**AGENTIC, "security.enabled": True, "retrieval.method": "bm25"})
    llm.then(
        tool_call("get_document", document="acl-b"),
        tool_call("summarize", document="acl-b"),
        tool_call("search", query="bergamot marmalade recipe"),
    )
    llm.answer = lambda request: "I could not find it in the documents."
    response = secure.post("/ai", json={**AGENT_BODY, "query": "bergamot?"},
                           headers={"X-User-Groups": "team-a"})  # fmt: skip
    assert response.status_code == 200, response.text
    assert_no_secret(response, llm)


def test_json_steps_let_a_small_local_model_call_the_tools(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """agentic.protocol=json (auto for the embedded GGUF models): a step is one JSON object,
    held to a schema, instead of the tools API the embedded 1.5B does not write."""
    client = make_client({**AGENTIC, "agentic.protocol": "json"})
    llm.then(
        Step(content='{"tool": "search", "input": "lighthouse lamp electrified"}'),
        Step(content='{"tool": "answer", "input": ""}'),
    )
    llm.answer = lambda request: "In 1952 [1]."
    # a question its first search finds nothing for: the steps choose the search
    answer = ok(client.post("/ai", json={**AGENT_BODY, "query": QUASAR}))
    assert answer["message"] == "In 1952 [1]."
    assert answer["documents"][0]["id"] == "lighthouse" and answer["documents"][0]["cited"]
    first, second, written = llm.requests
    tool, done = first.body["response_format"]["json_schema"]["schema"]["anyOf"]
    assert tool["properties"]["tool"] == {"enum": ["search", "ask", "summarize", "get_document"]}
    # "answer" takes no text: rag's stages write the answer from what the tools found
    assert done["properties"] == {"tool": {"const": "answer"},
                                  "input": {"type": "string", "maxLength": 0}}  # fmt: skip
    assert "tools" not in first.body
    assert "The lamp burned paraffin until 1952" in second.body["messages"][-1]["content"]
    assert "response_format" not in written.body and "Documents:" in written.prompt


@pytest.mark.parametrize("stream", [False, True])
def test_the_agent_s_answer_is_verified_and_refused_as_rag_s(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """Issue 68 (and 69, item 4): what decides rag's refusals decides the agent's. Its tools
    found the lighthouse; the verification (grounding.verify) says no document says the
    answer: the agent abstains as /ai/rag does, with no sources, and its own answer is never
    asked (nor streamed)."""
    # asked before the answer (as for the embedded model), a no leaves the answer unasked
    verified = {
        "grounding.verify": True,
        "grounding.abstain.unsupported": 0.5,
        "grounding.verify.parallel": False,
    }
    client = make_client({**AGENTIC, **verified, "retrieval.method": "bm25"})
    llm.then(
        Step(content="no", first_top={"no": 0.8, "yes": 0.2}),  # the first search's
        tool_call("search", query="lighthouse lamp"),
        Step(content="The keeper lit it [1]."),  # the agent decides it has the answer
    )
    llm.answer = lambda request: "A guess the documents do not hold [1]."
    if stream:
        sent = events(list(client.post("/ai/stream", json=AGENT_BODY).iter_lines()))
        final = of_type(sent, "message.final")[0]["text"]
        shown = "".join(data["text"] for data in of_type(sent, "message.delta"))
        assert final == shown == NOT_FOUND_SENTENCES["en"], sent
        assert of_type(sent, "sources.final")[0]["items"] == []
    else:
        answer = ok(client.post("/ai", json=AGENT_BODY))
        assert answer["message"] == NOT_FOUND_SENTENCES["en"] and answer["sources"] == []
    # the verification, two agent turns (finding nothing new): no answer asked
    assert len(llm.requests) == 3
    assert "Does a document above say" in llm.requests[0].prompt
    assert "Brannoch" in llm.requests[0].prompt  # asked of what the agent's search found
    assert all("tools" in request.body for request in llm.requests[1:])


def test_an_agent_s_turn_and_its_answer_share_one_request_timeout(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The agent's steps and rag's answer after them are one request: request.timeout bounds
    their sum (each of the four calls alone would fit; the answer's stages began a timeout of
    their own)."""
    client = make_client({**AGENTIC, "request.timeout": 1.5})
    slow = replace(tool_call("get_document", document="lighthouse"), delay=0.6)
    llm.then(slow, slow, slow)
    llm.delay = 0.6
    _timed_out(client.post("/ai", json=AGENT_BODY))


def test_an_agent_s_question_rag_would_refuse_is_refused_before_its_steps(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Review: a question with no words once sanitized was refused by the answer's stages,
    after every step of the agent had been taken (LLM calls, searches)."""
    client = make_client(AGENTIC)
    llm.then(*(tool_call("search", query="lighthouse") for _ in range(3)))
    response = client.post("/ai", json={**AGENT_BODY, "query": "???"})
    assert response.json()["status"] == "ERROR", response.text
    assert "empty once sanitized" in response.text and llm.requests == []


def test_an_agent_that_calls_no_tool_answers_as_rag_never_from_memory(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """A model that answers at once, without a tool, answers from its memory: the question is
    searched and answered as /ai/rag answers it instead, from the documents, cited."""
    client = make_client(AGENTIC)
    memory = "Lighthouses are kept by keepers, as everyone knows."
    # the question is searched and answered as /ai/rag answers it first: no turn is needed
    llm.then(Step(content=memory, takes=lambda request: "tools" in request.body))
    llm.answer = lambda request: "The keeper of Brannoch [1]."
    answer = ok(client.post("/ai", json=AGENT_BODY))
    assert answer["message"] == "The keeper of Brannoch [1]."
    assert answer["sources"][0]["id"] == "lighthouse" and answer["sources"][0]["cited"]
    (written,) = llm.requests
    assert "tools" not in written.body and "Brannoch" in written.prompt
    # that answer abstains; a turn that calls no tool is never the answer: rag's stands
    llm.reset()
    llm.then(NOT_THERE, Step(content=memory))
    answer = ok(client.post("/ai", json=AGENT_BODY))
    assert answer["message"] == NOT_THERE.content and answer["sources"] == []
    first, turn = llm.requests
    assert "tools" not in first.body and "Brannoch" in first.prompt and "tools" in turn.body


def test_a_search_in_one_document_that_finds_nothing_is_answered_as_rag_never_from_memory(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """searchChunksFromADocument says "nothing found in 'lighthouse'", not "nothing found": it
    counted as a tool's result, and the model's answer from memory was the agent's answer."""
    client = make_client({**AGENTIC, "retrieval.method": "bm25"})
    llm.then(
        NOT_THERE,  # rag's answer from the first search abstains: the loop runs
        tool_call("searchChunksFromADocument", documentId="lighthouse", query="zqxv wkpf"),
        Step(content="Lighthouses are kept by keepers, as everyone knows."),
    )
    llm.answer = lambda request: "The keeper of Brannoch [1]."
    answer = ok(client.post("/ai", json={**AGENT_BODY, "agent": "generic"}))
    result = llm.requests[2].body["messages"][-1]["content"]
    assert result == "nothing found in 'lighthouse'"
    # rag's answer stands (its abstention: nothing new was found), never the memory
    assert answer["message"] == NOT_THERE.content and answer["sources"] == []
    assert len(llm.requests) == 3


def test_an_agent_whose_answer_rag_may_not_write_is_refused_before_its_steps(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The agent's answer is rag's: with ai.enable.rag off it can never be written, and the
    agent took all its steps (LLM calls, searches) before it was refused."""
    client = make_client({**AGENTIC, "ai.enable.rag": False})
    llm.then(*(tool_call("search", query="lighthouse") for _ in range(3)))
    response = client.post("/ai", json=AGENT_BODY)
    assert response.json()["status"] == "ERROR", response.text
    assert "ai.enable.rag" in response.text
    assert llm.requests == []


def test_a_conversation_expires_after_its_time(make_client: ClientFactory, llm: LLMScript) -> None:
    """conversations.ttl.hours after its last message, a conversation is gone (waiting longer
    than that only makes it more so: no slow machine can break this)."""
    client = make_client(
        {"conversations.enabled": True, "api.keys": KEY, "conversations.ttl.hours": 0.0005}
    )
    client.headers.update(KEYED)  # conversations are an owner's: a keyed caller
    conversation = ok(client.post("/ai", json={"query": QUESTION}))["conversationId"]
    assert ok(client.get(f"/ai/conversations/{conversation}"))["messages"]
    time.sleep(0.0005 * 3600 + 1)
    error_of(client.get(f"/ai/conversations/{conversation}"), "428", "ragConversationNotFound", 404)


def test_filters_that_leave_too_many_documents_are_a_400_not_a_huge_filter(
    solr_url: str, corpus: object
) -> None:
    """Bounded work: filters are resolved to at most `limit` ids (10,000 shipped); more is a
    400 that says to narrow them (here with a limit of 2 on the test corpus)."""
    from service.config import Settings
    from service.retrieval.facet_filter import documents_matching
    from service.retrieval.scope import EVERYTHING
    from service.retrieval.solr import SolrClient

    layout = Settings().solr

    async def resolve(fq: str) -> tuple[str, ...]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            return await documents_matching(
                solr, "FileShare", layout.documents_map, EVERYTHING, [fq], limit=2
            )

    assert asyncio.run(resolve("language:fr")) == ("marseille",)
    with pytest.raises(FilterRefused, match="more than 2 documents"):
        asyncio.run(resolve("id:[* TO *]"))


def test_a_caller_keeps_at_most_its_share_of_conversations(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """conversations.max.per.caller: a new conversation beyond deletes the caller's oldest,
    so one caller cannot fill Solr."""
    client = make_client(
        {"conversations.enabled": True, "api.keys": KEY, "conversations.max.per.caller": 2}
    )
    client.headers.update(KEYED)  # conversations are an owner's: a keyed caller
    made = [ok(client.post("/ai", json={"query": QUESTION}))["conversationId"] for _ in range(3)]
    error_of(client.get(f"/ai/conversations/{made[0]}"), "428", "ragConversationNotFound", 404)
    for kept in made[1:]:
        assert ok(client.get(f"/ai/conversations/{kept}"))["messages"]


def test_a_turn_of_many_tool_calls_runs_three_each_cut_to_size(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Bounded work: at most 3 calls of one turn run, each result cut to 3,000 characters
    (a long document a crawler wrote included)."""
    client = make_client(AGENTIC)
    calls = [{"id": f"c{n}", "type": "function", "function": {
        "name": "get_document", "arguments": json.dumps({"document": "turbine-manual"})}}
        for n in range(6)]  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    llm.then(Step(body=json.dumps({"choices": [{"message": message}]})))
    llm.answer = lambda request: "It is in the manual [1]."
    ok(client.post("/ai", json={**AGENT_BODY, "query": QUASAR}))  # the loop from its start
    sent = llm.requests[1].body["messages"]
    asked = {call["id"] for call in calls}  # (the first search's result is before them)
    results = [m for m in sent if m.get("role") == "tool" and m["tool_call_id"] in asked]
    assert len(results) == 3 and len(sent[-4]["tool_calls"]) == 3
    assert all(0 < len(m["content"]) <= 3_000 for m in results)


def test_a_caller_over_its_cap_on_the_ai_api_gets_a_429_at_once(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """/ai and /ai/stream are LLM paths: the per-caller cap holds there too, answered at
    once, while the caller's questions in progress go on."""
    from concurrent.futures import ThreadPoolExecutor

    base = service({"llm.max.concurrent.per.caller": 1})
    llm.then(Step(content="slow [1]", delay=5))
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(httpx.post, f"{base}/ai", json=RAG_BODY, timeout=30)
        deadline = time.monotonic() + 10
        while not llm.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        for path in ("/ai", "/ai/stream"):
            refused = httpx.post(f"{base}{path}", json=RAG_BODY, timeout=30)
            assert refused.status_code == 429, refused.text
            assert refused.headers["Retry-After"]
        assert slow.result().status_code == 200


def test_a_synthesis_reports_every_call_and_keeps_one_deadline(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 67: a synthesis reported llm_calls=0, gave each document's summary a deadline of
    its own and its final call none; it is one request now (service.rag.synthesis)."""
    client = make_client({"ai.enable.summarization": True})
    body = {"action": "synthesize", "filters": {"id": ["lighthouse", "orchard"]}}
    response = client.post("/ai", json=body)
    assert response.status_code == 200 and response.json()["status"] == "OK", response.text
    assert response.json()["usage"]["llm_calls"] == len(llm.requests) == 3  # 2 summaries + 1
    assert "Write a synthesis of these documents" in llm.requests[-1].prompt
    # three calls of 0.8 s each within a request.timeout of 1.5 s: the whole synthesis times
    # out (each summary alone would fit)
    slow = make_client({"ai.enable.summarization": True, "request.timeout": 1.5})
    llm.reset()
    llm.delay = 0.8
    _timed_out(slow.post("/ai", json=body))


def test_the_generic_agent_s_guessed_id_still_finds_the_answer(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 68: the 1.5B called ragByDocument with a guessed id ("assert"), got a tool
    error and gave up. A question asked of a document that does not exist is asked of every
    document; another tool given such an id says how to find a real one. The tool calls carry
    Datafari's label, icon and i18nKey."""
    client = make_client({**AGENTIC, "agentic.max.steps": 4})
    llm.then(
        tool_call("ragByDocument", documentId="lamp", question="When was the lamp electrified?"),
        Step(content="It was electrified in 1952 [1]."),  # the question asked of every document
        tool_call("readNextChunks", documentId="no-such-doc", part="0"),
    )
    llm.answer = lambda request: "In 1952 [1]."
    # words no document holds: its first search (issue 83) finds nothing, the LLM's tools run
    body = {**AGENT_BODY, "agent": "generic", "query": "Xylophone quasar?"}
    sent = events(list(client.post("/ai/stream", json=body).iter_lines()))
    first, *results = [m["content"] for m in _last_turn(llm).body["messages"]
                       if m["role"] == "tool"]  # fmt: skip
    assert first == "nothing found"
    assert results[0].startswith("It was electrified in 1952")  # the answer, as it is
    asked = next(r for r in llm.requests if "When was the lamp electrified?" in r.prompt)
    assert "Brannoch" in asked.prompt  # retrieved from the whole index
    assert "Search first" in results[1] and "bm25Search" in results[1]
    _, *calls = of_type(sent, "tool.call")
    assert calls[0] == {"id": calls[0]["id"], "toolName": "ragByDocument",
                        "label": "Exploring document...", "icon": "search",
                        "i18nKey": "tool.ragByDocument"}  # fmt: skip
    final = of_type(sent, "message.final")[0]
    assert final["text"] == "In 1952 [1]."
    assert [s["id"] for s in of_type(sent, "sources.final")[0]["items"]] == ["lighthouse"]


def test_a_synthesis_reads_what_its_filters_leave_and_passes_over_missing_ids(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Review findings: filters.fq was ignored by a synthesis, and five ids that are not there
    hid the ones after them."""
    client = make_client({"ai.enable.summarization": True})
    narrowed = {"action": "synthesize", "filters": {"id": ["lighthouse"], "fq": ["id:orchard"]}}
    error_of(client.post("/ai", json=narrowed), "422", "synthesisNoFileContent")
    missing = [f"gone-{n}" for n in range(6)]
    body = {"action": "synthesize", "filters": {"id": [*missing, "lighthouse"]}}
    answer = ok(client.post("/ai", json=body))
    assert [s["id"] for s in answer["sources"]] == ["lighthouse"]


def test_a_synthesis_keeps_its_final_call_within_the_budget(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 67 review: the summaries never spend the synthesis's own call; with 2 calls and
    2 documents one summary is written, the other document left out, and the synthesis made
    (it failed with TooManyCalls after both summaries spent the budget)."""
    client = make_client({"ai.enable.summarization": True, "llm.max.calls.per.request": 2})
    body = {"action": "synthesize", "filters": {"id": ["lighthouse", "orchard"]}}
    response = client.post("/ai", json=body).json()
    assert response["status"] == "OK", (len(llm.requests), response)
    assert len(llm.requests) == 2 and len(response["content"]["sources"]) == 1


def test_out_of_steps_a_tool_call_written_as_text_never_streams(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 68 item 5, review: out of steps, a tool call the model writes as text in its last
    request (small models do, on "Answer now") neither streams nor is kept. (Its own answer is
    asked only when the tools returned no document: here each question asked was refused.)"""
    client = make_client(AGENTIC)
    refused = Step(content="I could not find the answer in the documents.")
    llm.then(*(step for _ in range(3) for step in (tool_call("ask", question="keeper?"), refused)))
    llm.answer = lambda request: (
        'I will search. {"name": "search", "arguments": {"query": "lighthouse keeper"}}'
    )
    # a question its first search finds nothing for: the loop from its start, out of steps
    asked = {**AGENT_BODY, "query": QUASAR}
    sent = events(list(client.post("/ai/stream", json=asked).iter_lines()))
    deltas = [data["text"] for data in of_type(sent, "message.delta")]
    assert deltas == ["I will search."], deltas
    assert of_type(sent, "message.final")[0]["text"] == "I will search."
