"""What grounding finds is what the reader sees, in every answer shape (issue 83): /ai/rag whole
and streamed, Datafari 7's /ai and /ai/stream, /v1 whole and streamed. A sentence the check
does not support is marked in each (or dropped, as grounding.action says), and an answer none
of whose sentences is supported is the not-found sentence, abstained, never streamed first."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript
from testing.service import ClientFactory
from tests.service.test_streaming import read_events

# the lighthouse document says it was electrified in 1952, never the rest
TRUE = "The lamp burned paraffin until 1952 [1]."
FALSE = "The lighthouse keeper was paid in gold coins [1]."
# in the source's words (no echo), yet neither sentence is what it says
INVENTED = "The lamp burned paraffin until 1890 [1]. In fog, the keeper never sounded the horn [1]."
NOT_FOUND = "I could not find the answer in the documents."
QUESTION = "lighthouse keeper"
# the shipped grounding policy (rag.properties)
SHIPPED = {"grounding.enabled": True, "grounding.method": "embeddings", "grounding.action": "flag"}


@dataclass(frozen=True)
class Shown:
    """An answer as one shape shows it: the message kept, what was streamed (None: whole),
    why it abstained, its grounding report, and the ids of the sources it lists."""

    message: str
    streamed: str | None
    abstained: str | None
    grounding: dict[str, Any] | None
    sources: list[str]

    @property
    def marks(self) -> list[bool]:
        assert self.grounding is not None, "the shape lost the grounding report"
        return [sentence["supported"] for sentence in self.grounding["sentences"]]


def rag(client: TestClient) -> Shown:
    response = client.post("/ai/rag", json={"query": QUESTION})
    assert response.status_code == 200, response.text
    body = response.json()
    sources = [d["id"] for d in body["content"]["documents"]]
    return Shown(body["content"]["message"], None, body["abstained"], body["grounding"], sources)


def rag_streamed(client: TestClient) -> Shown:
    with client.stream("POST", "/ai/rag", json={"query": QUESTION, "stream": True}) as response:
        events = read_events(response)
    assert [name for name, _ in events][-3:] == ["grounding", "sources", "done"], events
    streamed = "".join(data["text"] for name, data in events if name == "token")
    done = events[-1][1]
    sources = [d["id"] for d in events[-2][1]["documents"]]
    return Shown(done["message"], streamed, done["abstained"], done["grounding"], sources)


def ai(client: TestClient) -> Shown:
    response = client.post("/ai", json={"query": QUESTION, "action": "rag"})
    assert response.status_code == 200 and response.json()["status"] == "OK", response.text
    body = response.json()
    sources = [s["id"] for s in body["content"]["sources"]]
    message = body["content"]["message"]
    return Shown(message, None, body.get("abstained"), body.get("grounding"), sources)


def ai_streamed(client: TestClient) -> Shown:
    response = client.post("/ai/stream", json={"query": QUESTION, "action": "rag"})
    sent = [json.loads(line) for line in response.iter_lines() if line.strip()]
    kinds = [event["type"] for event in sent]
    assert kinds[-4:] == ["sources.final", "message.final", "phase", "stream.completed"], kinds
    streamed = "".join(e["data"]["text"] for e in sent if e["type"] == "message.delta")
    final = sent[-3]["data"]
    sources = [item["id"] for item in sent[-4]["data"]["items"]]
    return Shown(final["text"], streamed, final.get("abstained"), final.get("grounding"), sources)


V1 = {"model": "solr-rag", "messages": [{"role": "user", "content": QUESTION}]}


def v1(client: TestClient) -> Shown:
    response = client.post("/v1/chat/completions", json=V1)
    assert response.status_code == 200, response.text
    body = response.json()
    message = body["choices"][0]["message"]["content"]
    sources = [s["id"] for s in body["sources"]]
    return Shown(message, None, body.get("abstained"), body.get("grounding"), sources)


def v1_streamed(client: TestClient) -> Shown:
    with client.stream("POST", "/v1/chat/completions", json={**V1, "stream": True}) as response:
        chunks = [
            json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data: {")
        ]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    last = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    sources = [s["id"] for s in last["sources"]]
    return Shown(text, text, last.get("abstained"), last.get("grounding"), sources)


SHAPES: dict[str, Callable[[TestClient], Shown]] = {
    "/ai/rag": rag,
    "/ai/rag streamed": rag_streamed,
    "/ai": ai,
    "/ai/stream": ai_streamed,
    "/v1": v1,
    "/v1 streamed": v1_streamed,
}


@pytest.fixture
def shipped(make_client: ClientFactory) -> TestClient:
    return make_client(SHIPPED)


@pytest.mark.parametrize("shape", SHAPES)
def test_an_unsupported_sentence_is_marked_in_every_shape(
    shipped: TestClient, llm: LLMScript, shape: str
) -> None:
    llm.answer = lambda request: f"{TRUE} {FALSE}"
    shown = SHAPES[shape](shipped)
    assert shown.message.startswith(f"{TRUE} {FALSE}"), shown  # /v1's rag models add sources
    assert shown.streamed in (None, shown.message)
    assert shown.marks == [True, False] and shown.abstained is None
    assert "lighthouse" in shown.sources


@pytest.mark.parametrize("shape", SHAPES)
def test_dropped_the_kept_message_is_the_checked_one_and_still_lists_the_dropped(
    make_client: ClientFactory, llm: LLMScript, shape: str
) -> None:
    llm.answer = lambda request: f"{TRUE} {FALSE}"
    shown = SHAPES[shape](make_client({**SHIPPED, "grounding.action": "drop"}))
    assert shown.marks == [True, False]
    if shape != "/v1 streamed":  # OpenAI's deltas are the message: what was sent stays sent
        assert shown.message.startswith(TRUE) and FALSE not in shown.message, shown


@pytest.mark.parametrize("shape", SHAPES)
def test_an_answer_no_source_supports_is_a_refusal_in_every_shape(
    shipped: TestClient, llm: LLMScript, shape: str
) -> None:
    llm.answer = lambda request: INVENTED
    shown = SHAPES[shape](shipped)
    assert shown.message == NOT_FOUND, shown
    assert shown.streamed in (None, NOT_FOUND), shown  # none of the invented text was shown
    assert shown.abstained and "none of the answer's 2 sentences" in shown.abstained
    assert shown.sources == []
    if shown.grounding is not None:  # the report of what the LLM wrote: why it was refused
        assert shown.marks == [False, False]
