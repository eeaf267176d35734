"""Grounding in the service: each sentence of an answer checked against the sources it was
given, reported on every endpoint, and flagged, dropped or refused as grounding.action says."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from service.config import Settings
from service.text.citations import cited_numbers
from testing.llm_server import LLMScript, RecordedRequest, Step
from testing.servers import free_port
from testing.service import ClientFactory
from tests.service.test_streaming import read_events

# the lighthouse document says it was electrified in 1952, never the rest
TRUE = "The lamp burned paraffin until 1952 [1]."
FALSE = "The lighthouse keeper was paid in gold coins [1]."
ASK = {"query": "lighthouse", "id": "lighthouse"}
NOT_FOUND = "I could not find the answer in the documents."
MANUAL = {"query": "turbine maintenance", "id": "turbine-manual"}


def grounded(overrides: dict[str, object] | None = None) -> dict[str, object]:
    return {"grounding.enabled": True, **(overrides or {})}


def sentences(body: dict) -> list[tuple[str, bool, list[int]]]:
    return [(s["text"], s["supported"], s["sources"]) for s in body["grounding"]["sentences"]]


def test_each_sentence_is_reported_with_the_sources_that_support_it(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded())
    llm.then(Step(content=f"Here is what the documents say:\n- {TRUE}\n- {FALSE}"))
    response = client.post("/ai/rag", json=ASK)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["content"]["message"] == f"Here is what the documents say:\n- {TRUE}\n- {FALSE}"
    assert sentences(body) == [
        ("The lamp burned paraffin until 1952.", True, [1]),
        ("The lighthouse keeper was paid in gold coins.", False, []),
    ]  # the introduction states nothing: not counted
    assert (body["grounding"]["supported"], body["grounding"]["total"]) == (1, 2)
    assert body["grounding"]["method"] == "embeddings"
    assert "grounding" in body["timings"]


def test_off_the_answer_carries_no_report(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content=FALSE))
    body = client.post("/ai/rag", json=ASK).json()
    assert body["grounding"] is None and "grounding" not in body["timings"]


def test_drop_removes_the_unsupported_sentences_and_their_citations(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded({"grounding.action": "drop"}))
    llm.then(Step(content=f"{FALSE} {TRUE}"))
    body = client.post("/ai/rag", json=ASK).json()
    assert body["content"]["message"] == TRUE
    assert [s[1] for s in sentences(body)] == [False, True]  # what was dropped is still listed

    llm.then(Step(content="The keeper was paid in gold coins [1]. He owned three cats [1]."))
    response = client.post("/ai/rag", json=ASK)
    assert response.status_code == 428
    assert response.json()["content"]["label"] == "ragNoValidAnswer"
    assert "none of the answer's 2 sentences" in response.json()["content"]["reason"]


@pytest.mark.parametrize(
    ("answer", "status"),
    [(f"{TRUE} {FALSE}", 200), (f"{FALSE} {TRUE} He owned three cats.", 428)],
)
def test_refuse_answers_only_when_enough_sentences_are_supported(
    make_client: ClientFactory, llm: LLMScript, answer: str, status: int
) -> None:
    client = make_client(grounded({"grounding.action": "refuse", "grounding.min.ratio": 0.5}))
    llm.then(Step(content=answer))
    response = client.post("/ai/rag", json=ASK)
    assert response.status_code == status, response.text
    if status == 428:
        assert response.json()["content"]["label"] == "ragNoValidAnswer"
        assert "1 of the answer's 3 sentences" in response.json()["content"]["reason"]


def test_an_answer_that_found_nothing_lists_nothing_and_is_refused_under_refuse(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    nothing = "I could not find the answer in the documents."
    llm.then(Step(content=nothing))
    flagged = make_client(grounded()).post("/ai/rag", json={"query": "lighthouse"}).json()
    assert flagged["content"] == {"message": nothing, "documents": []}
    llm.then(Step(content=nothing))
    refusing = make_client(grounded({"grounding.action": "refuse"}))
    response = refusing.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 428
    assert response.json()["content"]["label"] == "ragNoValidAnswer"


def test_streamed_the_report_follows_the_text_and_done_has_the_checked_message(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded({"grounding.action": "drop"}))
    llm.then(Step(content=f"{TRUE} {FALSE}"))
    with client.stream("POST", "/ai/rag", json={**ASK, "stream": True}) as response:
        events = read_events(response)
    names = [name for name, _ in events]
    assert names[-3:] == ["grounding", "sources", "done"] and set(names[:-3]) == {"token"}
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert streamed == f"{TRUE} {FALSE}"  # sent before the check
    report = events[-3][1]
    assert [s["supported"] for s in report["sentences"]] == [True, False]
    assert events[-1][1]["message"] == TRUE


def test_streamed_a_refused_answer_ends_with_an_error_event(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded({"grounding.action": "refuse", "grounding.min.ratio": 1}))
    llm.then(Step(content=f"{TRUE} {FALSE}"))
    with client.stream("POST", "/ai/rag", json={**ASK, "stream": True}) as response:
        events = read_events(response)
    assert events[-1][0] == "error"
    assert events[-1][1]["content"]["label"] == "ragNoValidAnswer"
    assert "done" not in [name for name, _ in events]


def test_the_openai_endpoint_carries_the_report_whole_and_streamed(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded())
    request = {"model": "solr-rag", "messages": [{"role": "user", "content": "lighthouse keeper"}]}
    llm.then(Step(content=f"{TRUE} {FALSE}"))
    body = client.post("/v1/chat/completions", json=request).json()
    assert [s["supported"] for s in body["grounding"]["sentences"]] == [True, False]
    llm.then(Step(content=f"{TRUE} {FALSE}"))
    with client.stream("POST", "/v1/chat/completions", json={**request, "stream": True}) as r:
        chunks = [json.loads(line[5:]) for line in r.iter_lines() if line[5:].strip()[:1] == "{"]
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["grounding"]["supported"] == 1 and last["grounding"]["total"] == 2
    assert all("grounding" not in chunk for chunk in chunks[:-1])


def test_meaning_supports_what_words_do_not_and_a_dead_embeddings_api_leaves_words(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    # a paraphrase sharing few of the source's words
    paraphrase = "The Brannoch lighthouse light was switched on nightly by its keeper [1]."
    llm.then(Step(content=paraphrase))
    by_meaning = make_client(grounded()).post("/ai/rag", json=ASK).json()["grounding"]
    assert (by_meaning["supported"], by_meaning["method"]) == (1, "embeddings")
    llm.then(Step(content=paraphrase))
    words_only = make_client(grounded({"grounding.method": "words"}))
    assert words_only.post("/ai/rag", json=ASK).json()["grounding"]["supported"] == 0
    dead = f"http://127.0.0.1:{free_port()}/v1/"
    llm.then(Step(content=paraphrase))
    degraded = make_client(grounded({"ai.embeddings.endpoint": dead}))
    response = degraded.post("/ai/rag", json=ASK)
    assert response.status_code == 200
    assert response.json()["grounding"]["method"] == "words"


def verdicts(*supported: bool) -> Step:
    entries = [{"id": i, "supported": s} for i, s in enumerate(supported, 1)]
    return Step(content=json.dumps({"verdicts": entries}))


def test_the_llm_judges_each_sentence_against_its_closest_source_sentences(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(grounded({"grounding.method": "llm"}))
    llm.then(Step(content=f"{TRUE} {FALSE}"), verdicts(False, True))  # a judge that disagrees
    body = client.post("/ai/rag", json=ASK).json()
    assert body["grounding"]["method"] == "llm"
    assert [s[1] for s in sentences(body)] == [False, True]
    assert body["usage"]["llm_calls"] == 2
    judging = llm.requests[1].prompt
    assert '<statement id="1">The lamp burned paraffin until 1952.</statement>' in judging
    assert "The lamp burned paraffin until 1952, when the lighthouse was electrified" in judging


@pytest.mark.parametrize(
    ("judge", "overrides"),
    [
        (Step(content="Both are true."), {}),
        (verdicts(True), {}),  # one verdict for two statements
        (Step(content="down", status=500), {}),
        (None, {"llm.max.calls.per.request": 1}),  # no call left for the judge
    ],
)
def test_what_the_llm_cannot_judge_falls_to_the_default_check(
    make_client: ClientFactory, llm: LLMScript, judge: Step | None, overrides: dict
) -> None:
    client = make_client(grounded({"grounding.method": "llm", **overrides}))
    llm.then(Step(content=f"{TRUE} {FALSE}"), *([judge] if judge else []))
    response = client.post("/ai/rag", json=ASK)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["grounding"]["method"] == "llm+embeddings"
    assert [s[1] for s in sentences(body)] == [True, False]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("grounding.min.ratio", "1.5"),
        ("grounding.min.overlap", "0"),
        ("grounding.min.similarity", "nan"),
        ("grounding.action", "delete"),
        ("grounding.method", "oracle"),
    ],
)
def test_absurd_grounding_settings_are_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=re.escape(key)):
        Settings.of({key: value})


def uncited_copy(request: RecordedRequest) -> str:
    """A model that never cites: the first words of the first source it was shown (else of
    the answer it was asked to improve or combine), with no [n]."""
    source = re.search(r"^######\n(?:\[\d+\][^\n]*\n)?([^\n]+)", request.prompt, re.M)
    assert source is not None, request.prompt
    words = source.group(1).split()
    return " ".join(words[:14]).rstrip(".") + "."


@pytest.mark.parametrize("strategy", ["refine", "mapreduce"])
def test_an_answer_whose_last_step_dropped_its_citations_gets_them_back(
    make_client: ClientFactory, llm: LLMScript, strategy: str
) -> None:
    """Issue 86: whatever the last step of refine or map-reduce writes, the answer cites the
    sources that support it (by grounding's words), streamed or whole, and only those."""
    client = make_client(
        grounded(
            {
                "prompt.chunking.strategy": strategy,
                "prompt.max.request.size": 2500,
                "chunking.chunk.size": 500,
            }
        )
    )
    llm.answer = uncited_copy
    body = client.post("/ai/rag", json=MANUAL).json()
    message = body["content"]["message"]
    assert "usage" in body and body["usage"]["llm_calls"] > 1, body
    assert message.endswith(" [1].") and cited_numbers(message) == {1}, message
    assert [d["cited"] for d in body["content"]["documents"]] == [True]
    assert all(s["supported"] for s in body["grounding"]["sentences"]), body["grounding"]
    with client.stream("POST", "/ai/rag", json={**MANUAL, "stream": True}) as response:
        events = read_events(response)
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert streamed == events[-1][1]["message"] and streamed.endswith(" [1]"), events[-1]


def test_a_stuff_answer_and_an_unsupported_stepped_one_are_not_given_citations(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Citations are given back only where the steps wrote the answer and a source supports
    it: a one-request answer stays as the model wrote it, and so does an invented one."""
    llm.answer = uncited_copy
    stuff = make_client(grounded()).post("/ai/rag", json=MANUAL).json()
    assert "[" not in stuff["content"]["message"], stuff
    llm.answer = lambda request: "The wind turbine maintenance manual was written in 1066."
    stepped = {
        "prompt.chunking.strategy": "refine",
        "prompt.max.request.size": 2500,
        "chunking.chunk.size": 500,
    }
    body = make_client(stepped).post("/ai/rag", json=MANUAL).json()
    assert body["content"]["message"].endswith(" in 1066."), body
    # checked, it is no answer at all: none of its sentences is supported
    body = make_client(grounded(stepped)).post("/ai/rag", json=MANUAL).json()
    assert body["content"]["message"] == NOT_FOUND and body["abstained"], body
    assert not any(s["supported"] for s in body["grounding"]["sentences"]), body
