"""Streaming: /ai/rag with "stream": true, tokens as soon as the LLM sends them."""

from __future__ import annotations

import json
import re
import time

from fastapi.testclient import TestClient

from testing.llm_server import LLMScript, Step
from testing.service import ClientFactory


def read_events(response) -> list[tuple[str, dict]]:
    events = []
    name = "message"
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            events.append((name, json.loads(line.split(":", 1)[1])))
            name = "message"
    return events


def test_rag_streams_tokens_then_sources_then_done(client: TestClient, llm: LLMScript) -> None:
    answer = "The keeper lit the lamp every evening, and the lamp was electrified in 1952 [1]."
    llm.then(Step(content=answer))
    with client.stream("POST", "/ai/rag", json={"query": "lighthouse", "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    names = [name for name, _ in events]
    assert names[-2:] == ["sources", "done"]
    assert set(names[:-2]) == {"token"} and len(names) > 4
    text = "".join(data["text"] for name, data in events if name == "token")
    assert text == answer
    sources = events[-2][1]["documents"]
    assert sources[0]["id"] == "lighthouse" and sources[0]["cited"] is True
    done = events[-1][1]
    assert done["status"] == "OK" and done["message"] == text
    assert done["usage"]["llm_calls"] == 1
    assert llm.requests[0].body["stream"] is True


def test_errors_before_the_answer_are_plain_json(client: TestClient, llm: LLMScript) -> None:
    response = client.post("/ai/rag", json={"query": "xylophonist", "stream": True})
    assert response.status_code == 428
    assert response.json()["content"]["label"] == "ragNoFileFound"


def test_an_llm_failure_becomes_an_error_event(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="overloaded", status=500))
    with client.stream("POST", "/ai/rag", json={"query": "lighthouse", "stream": True}) as response:
        events = read_events(response)
    assert [name for name, _ in events] == ["error"]
    assert events[0][1]["content"]["label"] == "ragTechnicalError"


def test_only_the_final_request_of_mapreduce_streams(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(
        {
            "prompt.chunking.strategy": "mapreduce",
            "prompt.max.request.size": 2500,
            "chunking.chunk.size": 500,
        }
    )
    body = {"query": "turbine maintenance", "id": "turbine-manual", "stream": True}
    with client.stream("POST", "/ai/rag", json=body) as response:
        events = read_events(response)
    assert events[-1][0] == "done"
    streamed = [r.body.get("stream") for r in llm.requests]
    assert streamed.count(True) == 1 and streamed[-1] is True
    assert len(streamed) >= 5


SAID = "The keeper lit the lamp every evening at dusk, as the records say. "


def test_first_token_arrives_before_the_llm_finishes(client: TestClient, llm: LLMScript) -> None:
    # the first words must say something of the sources, else they are held (an echo)
    words = f"{SAID}Then a long pause [1]."
    llm.then(Step(content=words, pause_after_first_chunk=1.5, pause_after_words=10))
    started = time.monotonic()
    with client.stream("POST", "/ai/rag", json={"query": "lighthouse", "stream": True}) as response:
        lines = response.iter_lines()
        first_token_at = None
        for line in lines:
            if line.startswith("data:") and '"text"' in line:
                first_token_at = time.monotonic()
                break
        for _ in lines:
            pass
    ended = time.monotonic()
    assert first_token_at is not None
    assert first_token_at - started < 1.0
    assert ended - started >= 1.5
    assert llm.requests[0].first_chunk_sent <= first_token_at


# -- "nothing found" looks like nothing found (issue 20) -------------------------------------


GIBBERISH = {"query": "xqzv blorf wuggle", "stream": True}


def test_an_answer_that_found_nothing_lists_no_sources(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Hybrid always finds some passage; an answer saying they hold nothing must not list them."""
    client = make_client({"retrieval.method": "hybrid", "retrieval.similarity.min": 0})
    llm.answer = lambda _: "I could not find the answer in the documents."
    whole = client.post("/ai/rag", json={**GIBBERISH, "stream": False})
    assert whole.status_code == 200, whole.text
    assert whole.json()["content"]["documents"] == []
    assert llm.requests  # the LLM was asked: the documents were there, and said nothing
    read = len(set(re.findall(r"(?m)^\[(\d+)\] ", llm.requests[0].prompt)))
    why = f"the LLM read {read} source{'s' if read != 1 else ''} and said they do not hold"
    assert read >= 1 and whole.json()["abstained"].startswith(why)  # the response says why
    with client.stream("POST", "/ai/rag", json=GIBBERISH) as response:
        events = dict(read_events(response))
    assert events["sources"]["documents"] == []
    assert events["done"]["abstained"].startswith(why)


def test_an_answer_citing_a_source_keeps_its_sources(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Saying what the documents do not mention, while citing them, is an answer."""
    client = make_client({"retrieval.method": "bm25"})
    llm.answer = lambda _: "The documents do not mention a date; the lamp is lit at dusk [1]."
    response = client.post("/ai/rag", json={"query": "lighthouse lamp"})
    documents = response.json()["content"]["documents"]
    assert documents and documents[0]["cited"] is True
    assert response.json()["abstained"] is None
