"""Issue 83, item 1: the agent within the time of rag plus one step. Its first step is the
question searched as rag searches it (no LLM call chooses it), shown as its search tool; when
that search finds what answers, the answer is rag's from it (the verification and the answer:
rag's two calls); only an answer that abstains lets the LLM's tool loop run, the first search
already in its messages."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from service.chains.prompts import NOT_FOUND_SENTENCES
from testing.llm_server import LLMScript, RecordedRequest, Step, verification
from testing.service import ClientFactory
from tests.service.test_datafari7 import events, of_type, ok, tool_call

QUESTION = "Who kept the lighthouse lamp lit?"
# Datafari 7's MCP server's agentic tool, its exact body (../shared/datafari7-clients.md)
MCP_AGENTIC = {"query": QUESTION, "action": "agentic", "agent": "generic", "filters": {},
               "history": []}  # fmt: skip
# the embedded model's way: the verification asked first, its no refusing the answer
VERIFIED = {
    "agentic.enabled": True,
    "agentic.max.steps": 3,
    "grounding.verify": True,
    "grounding.verify.parallel": False,
    "grounding.abstain.unsupported": 0.5,
}
YES = {"yes": 0.9, "no": 0.1}
NO = {"no": 0.8, "yes": 0.2}


def says(first_top: dict[str, float]) -> Step:
    word = max(first_top, key=first_top.__getitem__)
    return Step(content=word, first_top=first_top, takes=verification)


def answers(request: RecordedRequest) -> bool:
    """The answer's request (neither a verification nor an agent's turn)."""
    return not verification(request) and "tools" not in request.body


def _answer_requests(llm: LLMScript) -> list[RecordedRequest]:
    return [request for request in llm.requests if answers(request)]


def test_datafari_s_mcp_agentic_request_answers_as_rag_in_rag_s_calls(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(VERIFIED)
    for body in (MCP_AGENTIC, {**MCP_AGENTIC, "lang": "en"}, {**MCP_AGENTIC, "lang": "fr"}):
        llm.reset()
        llm.answer = lambda request: "The keeper of Brannoch kept it lit [1]."
        llm.then(says(YES))
        rag = ok(client.post("/ai", json={**body, "action": "rag"}))
        rag_calls = len(llm.requests)
        (rag_written,) = _answer_requests(llm)
        llm.reset()
        llm.answer = lambda request: "The keeper of Brannoch kept it lit [1]."
        llm.then(says(YES))
        agent = ok(client.post("/ai", json=body))
        assert len(llm.requests) == rag_calls == 2  # the verification, the answer: no turn
        assert not any("tools" in request.body for request in llm.requests)
        assert agent["message"] == rag["message"] == "The keeper of Brannoch kept it lit [1]."
        assert [s["id"] for s in agent["sources"]] == [s["id"] for s in rag["sources"]]
        assert agent["sources"][0]["cited"] and agent["sources"][0]["id"] == "lighthouse"
        # rag's own request: the same documents, in the same order, the same words
        (written,) = _answer_requests(llm)
        assert written.body["messages"] == rag_written.body["messages"]


def test_the_first_search_streams_as_a_tool_then_rag_s_answer(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(VERIFIED)
    llm.answer = lambda request: "The keeper of Brannoch kept it lit [1]."
    llm.then(says(YES))
    sent = events(list(client.post("/ai/stream", json=MCP_AGENTIC).iter_lines()))
    (call,) = of_type(sent, "tool.call")
    (result,) = of_type(sent, "tool.result")
    assert call["toolName"] == "bm25Search" and result["id"] == call["id"]  # generic's own
    kinds = [event["type"] for event in sent]
    assert kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("message.delta")
    deltas = "".join(data["text"] for data in of_type(sent, "message.delta"))
    (final,) = of_type(sent, "message.final")
    assert deltas == final["text"] == "The keeper of Brannoch kept it lit [1]."
    assert of_type(sent, "sources.final")[0]["items"][0]["id"] == "lighthouse"
    assert len(llm.requests) == 2


def test_a_question_the_first_search_does_not_answer_reaches_the_tool_loop(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({**VERIFIED, "llm.max.calls.per.request": 16})
    llm.then(
        says(NO),  # the first search's documents do not say it: the tool loop runs
        tool_call("readNextChunks", documentId="marseille", part="0"),  # the LLM reads another one
        Step(content="I have what I need."),
        says(YES),  # the answer from what the tools found, verified
    )
    llm.answer = lambda request: "The keeper of Marseille [2]."
    sent = events(list(client.post("/ai/stream", json=MCP_AGENTIC).iter_lines()))
    assert [d["toolName"] for d in of_type(sent, "tool.call")] == ["bm25Search", "readNextChunks"]
    (final,) = of_type(sent, "message.final")
    assert final["text"] == "The keeper of Marseille [2]."
    turns = [request for request in llm.requests if "tools" in request.body]
    assert len(turns) == 2
    # the first search is in the loop's messages: the LLM is not asked to repeat it
    first = turns[0].body["messages"]
    assert first[-2]["tool_calls"][0]["function"]["name"] == "bm25Search"
    assert json.loads(first[-2]["tool_calls"][0]["function"]["arguments"]) == {"query": QUESTION}
    assert first[-1]["role"] == "tool" and "The lighthouse keeper" in first[-1]["content"]
    # the answer is written from both: what the first search and the LLM's tool found
    (written,) = _answer_requests(llm)
    assert "Brannoch" in written.prompt and "mistral" in written.prompt
    # the verification's no, two turns, the verification and the answer
    assert len(llm.requests) == 5


def test_a_loop_that_finds_nothing_new_keeps_the_first_abstention(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Asked again of the same documents, rag says the same: the abstention stands, without
    two more calls."""
    client = make_client(VERIFIED)
    llm.then(says(NO), Step(content="Nothing more to do."))
    answer = ok(client.post("/ai", json=MCP_AGENTIC))
    assert answer["message"] == NOT_FOUND_SENTENCES["en"] and answer["sources"] == []
    assert len(llm.requests) == 2  # the verification's no, one turn


def test_the_call_budget_bounds_the_whole_turn(make_client: ClientFactory, llm: LLMScript) -> None:
    """rag's two calls spent on an abstention leave the loop what the budget has left, the
    answer's calls kept for it."""
    client: TestClient = make_client({**VERIFIED, "llm.max.calls.per.request": 5})
    llm.then(
        says(NO), *(tool_call("readNextChunks", documentId="marseille", part="0") for _ in range(3))
    )
    llm.then(says(YES))
    llm.answer = lambda request: "The keeper of Marseille [2]."
    ok(client.post("/ai", json=MCP_AGENTIC))
    assert len(llm.requests) <= 5
