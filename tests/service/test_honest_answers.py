"""Issue 59: an answer says something the documents say, or says it does not know."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.chains.prompts import NOT_FOUND_SENTENCES
from testing.llm_server import LLMScript, RecordedRequest, Step, verification
from testing.servers import serve_in_thread
from testing.service import ROOT, ClientFactory, write_properties
from tests.service.test_streaming import read_events

ECHO = "the answer only restated the question"


def _question_back(request: RecordedRequest) -> str:
    """What a lost small model writes: the question's words, cited."""
    question = request.prompt.rsplit("Question:", 1)[-1].strip().split("\n", 1)[0]
    return question.rstrip("?") + " [1]"


def test_gibberish_said_back_is_no_answer(client: TestClient, llm: LLMScript) -> None:
    llm.answer = _question_back
    response = client.post("/ai/rag", json={"query": "xylophonistzz qwertyuiop lighthouse"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert llm.requests, "the LLM was asked: retrieval found the lighthouse"
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["en"]
    assert body["content"]["documents"] == []
    assert body["abstained"].startswith(ECHO)


def test_a_restated_question_is_no_answer_streamed_or_whole(
    client: TestClient, llm: LLMScript
) -> None:
    llm.then(Step(content="The lighthouse lamp was electrified when it was electrified. [1]"))
    whole = client.post("/ai/rag", json={"query": "When was the lighthouse lamp electrified?"})
    assert whole.json()["abstained"].startswith(ECHO), whole.text
    llm.then(Step(content="The lighthouse lamp was electrified when it was electrified. [1]"))
    body = {"query": "When was the lighthouse lamp electrified?", "stream": True}
    with client.stream("POST", "/ai/rag", json=body) as response:
        events = read_events(response)
    streamed = "".join(data["text"] for name, data in events if name == "token")
    done = dict(events)["done"]
    assert done["abstained"].startswith(ECHO)
    assert done["message"] == NOT_FOUND_SENTENCES["en"]
    assert "electrified" not in streamed  # the echo never reached the screen
    assert dict(events)["sources"]["documents"] == []


def test_an_answer_from_the_sources_stays(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="It was electrified in 1952, when it stopped burning paraffin [1]."))
    response = client.post("/ai/rag", json={"query": "When was the lighthouse lamp electrified?"})
    body = response.json()
    assert body["abstained"] is None, body
    assert body["content"]["documents"][0]["cited"] is True


def test_a_french_echo_gets_the_french_sentence(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"retrieval.method": "bm25"})
    echo = Step(content="Le phare est électrifié quand le phare est électrifié. [1]")
    llm.then(echo, echo)  # asked again (grounding.echo.again), it says the question back again
    response = client.post(
        "/ai/rag", json={"query": "Quand le phare a-t-il été électrifié ?", "lang": "fr"}
    )
    assert "Write the answer in French" in llm.requests[-1].prompt  # the second asking too
    body = response.json()
    assert response.status_code == 200, response.text
    assert (
        body["abstained"].startswith(ECHO)
        and body["content"]["message"] == (NOT_FOUND_SENTENCES["fr"])
    )


def test_an_echo_is_no_valid_answer_when_grounding_refuses(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "bm25", "grounding.enabled": True,
                          "grounding.action": "refuse"})  # fmt: skip
    llm.answer = _question_back
    response = client.post("/ai", json={"query": "When was the lighthouse lamp electrified?",
                                        "action": "rag"})  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ERROR", body
    assert body["content"]["error"]["label"] == "ragNoValidAnswer"


# -- the model's own doubt (issue 59, item 1) ------------------------------------------------------


def _asked(client: TestClient, question: dict) -> tuple[dict, str]:
    """(what the answer ended with, the text streamed): the done event (its `documents`, the
    sources event's) when `question` streams, else the JSON body with its message."""
    with client.stream("POST", "/ai/rag", json=question) as response:
        if not question.get("stream"):
            response.read()
            body = response.json()
            return {**body, "message": body["content"]["message"]}, ""
        events = read_events(response)
    streamed = "".join(data["text"] for name, data in events if name == "token")
    return {**dict(events)["done"], "documents": dict(events)["sources"]["documents"]}, streamed


DOUBTFUL = {"I": 0.45, "The": 0.40, "It": 0.15}  # the not-found sentence's first token: 0.45


def test_the_answer_reports_the_models_confidence(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="The lamp was electrified in 1952 [1].", first_top=DOUBTFUL))
    body = client.post("/ai/rag", json={"query": "When was the lighthouse lamp electrified?"})
    confidence = body.json()["confidence"]
    assert confidence["not_found"] == 0.45, confidence
    assert confidence["signal"].startswith("not_found")
    assert body.json()["abstained"] is None  # reported only: no threshold is set
    assert llm.requests[-1].body["logprobs"] is True and llm.requests[-1].body["top_logprobs"] == 5


def test_an_llm_without_probabilities_says_which_signal_is_left(
    client: TestClient, llm: LLMScript
) -> None:
    llm.then(Step(content="The lamp was electrified in 1952 [1]."))
    confidence = client.post("/ai/rag", json={"query": "lighthouse lamp"}).json()["confidence"]
    assert confidence["signal"].startswith("none: the LLM reported no token probabilities")
    assert confidence["not_found"] is None


@pytest.mark.parametrize("stream", [False, True])
def test_a_doubtful_first_step_abstains_before_any_word_is_shown(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    client = make_client({"retrieval.method": "bm25", "grounding.abstain.not.found": 0.3})
    question = {"query": "When was the lighthouse lamp electrified?", "stream": stream}
    llm.then(Step(content="The lamp was electrified in 1952 [1].", first_top=DOUBTFUL))
    done, streamed = _asked(client, question)
    assert done["message"] == NOT_FOUND_SENTENCES["en"], done
    assert done["abstained"].startswith("the LLM's first step gave its not-found sentence")
    if stream:
        assert streamed == NOT_FOUND_SENTENCES["en"]  # the answer never reached the screen
    sure = {"I": 0.1, "The": 0.9}
    llm.then(Step(content="The lamp was electrified in 1952 [1].", first_top=sure))
    body = client.post("/ai/rag", json={**question, "stream": False}).json()
    assert body["abstained"] is None and "1952" in body["content"]["message"]


def test_llm_logprobs_false_asks_for_none(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"retrieval.method": "bm25", "llm.logprobs": False})
    client.post("/ai/rag", json={"query": "lighthouse lamp"})
    assert "logprobs" not in llm.requests[-1].body


@pytest.mark.parametrize(
    "question",
    [
        " ".join(["lighthouse"] * 2000),
        "the of and what is it",
        "?!... ;; --",
        "[1]",
        "Что такое маяк и когда его электрифицировали?",
        "灯台のランプはいつ電化されましたか",
    ],
)
def test_absurd_questions_get_an_abstention_or_a_400_never_an_echo(
    make_client: ClientFactory, llm: LLMScript, question: str
) -> None:
    client = make_client({"retrieval.method": "hybrid", "retrieval.similarity.min": 0})
    llm.answer = _question_back
    response = client.post("/ai/rag", json={"query": question})
    assert response.status_code in (200, 400, 413, 428), response.text
    if response.status_code == 200:
        body = response.json()
        assert body["abstained"] is not None, body
        assert body["content"]["documents"] == []


# -- grounding.verify: "does a document above say the answer?" asked before the answer ----------

VERIFIED = {"grounding.verify": True, "grounding.abstain.unsupported": 0.5}
# the verification before the answer, as for the embedded model (grounding.verify.parallel)
IN_TURN = {**VERIFIED, "grounding.verify.parallel": False}
LAMP = "When was the lighthouse lamp electrified?"


def _verification_and_answer(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """The verification, then the answer's request, in whichever order they arrived."""
    return sorted(requests, key=lambda request: not verification(request))


def _prefix_shared(verification: RecordedRequest, answer: RecordedRequest) -> None:
    """The two requests begin alike up to the question (the LLM's prompt cache serves both)."""
    assert verification.messages[:-1] == answer.messages[:-1]  # system message, history
    head = verification.prompt.split("Question:", 1)[0]
    assert head.startswith("Documents:") and answer.prompt.startswith(head)
    assert verification.prompt.split("\n\n")[-1].startswith("Does a document above say")


@pytest.mark.parametrize("stream", [False, True])
def test_a_no_from_the_verification_abstains_without_asking_the_answer(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """Asked before the answer (the embedded model's way), a no leaves the answer unasked."""
    client = make_client({"retrieval.method": "bm25", **IN_TURN})
    llm.then(Step(content="no", first_top={"no": 0.7, "yes": 0.2, "No": 0.1}))
    done, streamed = _asked(client, {"query": LAMP, "stream": stream})
    assert done["message"] == NOT_FOUND_SENTENCES["en"], done
    assert "below grounding.abstain.unsupported (0.5)" in done["abstained"]
    assert done["confidence"]["supported"] == 0.2
    assert [r.body["max_tokens"] for r in llm.requests] == [1]  # the answer was not asked
    asked = llm.requests[0].body
    assert asked["logprobs"] is True and asked["top_logprobs"] == 10
    if stream:
        assert streamed == NOT_FOUND_SENTENCES["en"]
        assert done["documents"] == []


def test_a_yes_from_the_verification_answers_and_reports_it(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "bm25", **VERIFIED})
    llm.then(
        Step(content="Yes", first_top={"Yes": 0.6, "yes": 0.2, "No": 0.2}, takes=verification),
        Step(content="It was electrified in 1952 [1].", first_top={"It": 0.95, "I": 0.05}),
    )
    body = client.post("/ai/rag", json={"query": LAMP}).json()
    assert body["abstained"] is None and "1952" in body["content"]["message"], body
    assert body["confidence"]["supported"] == 0.8
    assert body["confidence"]["signal"].endswith("yes, a document says the answer")
    assert len(llm.requests) == 2 and body["usage"]["llm_calls"] == 2
    _prefix_shared(*_verification_and_answer(llm.requests))
    assert "verify" in body["timings"]


def test_a_french_question_is_verified_in_french_words_too(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "bm25", **VERIFIED})
    llm.then(Step(content="Non", first_top={"Non": 0.9, "Oui": 0.1}, takes=verification))
    body = client.post(
        "/ai/rag", json={"query": "Quand la lampe du phare a-t-elle été électrifiée ?"}
    ).json()
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["fr"], body
    assert body["confidence"]["supported"] == 0.1


@pytest.mark.parametrize(
    "first_top",
    [None, {"Maybe": 0.9, "Perhaps": 0.1}],  # no probabilities; neither yes nor no
    ids=["no-logprobs", "neither-word"],
)
def test_a_verification_that_says_nothing_leaves_the_answer_alone(
    make_client: ClientFactory, llm: LLMScript, first_top: dict[str, float] | None
) -> None:
    client = make_client({"retrieval.method": "bm25", **VERIFIED})
    llm.then(Step(content="Maybe", first_top=first_top, takes=verification))
    body = client.post("/ai/rag", json={"query": LAMP}).json()
    assert body["abstained"] is None and body["confidence"]["supported"] is None, body
    assert len(llm.requests) == 2


def test_no_verification_without_logprobs_or_when_off(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    for settings in ({"llm.logprobs": False, **VERIFIED}, {"grounding.verify": False}):
        llm.reset()
        client = make_client({"retrieval.method": "bm25", **settings})
        body = client.post("/ai/rag", json={"query": LAMP}).json()
        assert len(llm.requests) == 1 and body["confidence"]["supported"] is None, settings
        assert "Does a document above say" not in llm.requests[0].prompt


def test_a_short_answers_citation_is_streamed_as_it_is_kept(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The short answer's citation is made true once the answer is whole (true_citation): it
    waits for the end, so what streamed is what is kept even when its number changes."""
    client = make_client({"retrieval.method": "bm25", "prompt.answer.form": "short"})

    def cites_another(request: RecordedRequest) -> str:
        blocks = re.findall(r"^\[(\d+)\][^\n]*\n([^#]*)", request.prompt, re.M)
        holds = [int(n) for n, text in blocks if "paraffin" in text]
        other = next((int(n) for n, _ in blocks if int(n) not in holds), 0)
        return f"The lamp burned paraffin until 1952 [{other}]"

    llm.answer = cites_another
    done, streamed = _asked(client, {"query": "When did the lighthouse lamp stop burning "
                                              "paraffin, and what did the orchard grow?",
                                     "stream": True})  # fmt: skip
    assert "grammar" in llm.requests[-1].body  # the short answer's form was asked
    written = cites_another(llm.requests[-1])
    assert written != done["message"], "the citation was made true: its number changed"
    assert streamed == done["message"] and done["message"].startswith("The lamp burned")


def test_a_short_answer_is_the_phrase_the_question_asks_for_streamed_as_kept(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 69, item 2: the 1.5B says the question back around the phrase that answers it;
    for a question a phrase answers the kept answer is that phrase with its citation, and what
    streamed is that answer. A question that asks how keeps its sentence."""
    client = make_client({"retrieval.method": "bm25", "prompt.answer.form": "short"})
    llm.answer = lambda request: "The lighthouse lamp was electrified in 1952 [1]"
    for stream in (True, False):
        done, streamed = _asked(client, {"query": LAMP, "stream": stream})
        assert "grammar" in llm.requests[-1].body  # the short answer's form was asked
        assert re.fullmatch(r"1952 \[\d\]", done["message"]), done["message"]
        assert streamed == (done["message"] if stream else "")
    done, streamed = _asked(client, {"query": "How was the lighthouse lamp electrified?",
                                     "stream": True})  # fmt: skip
    assert done["message"].startswith("The lighthouse lamp was electrified in 1952")
    assert streamed == done["message"]
    off = make_client({"retrieval.method": "bm25", "prompt.answer.form": "short",
                       "prompt.answer.phrase": False})  # fmt: skip
    done, _ = _asked(off, {"query": LAMP, "stream": True})
    assert done["message"].startswith("The lighthouse lamp was electrified in 1952")


def test_the_verification_s_call_is_kept_from_grading(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 67: with grading on and a tight llm.max.calls.per.request, grading used to leave
    one call, the verification spent it and the answer failed (TooManyCalls). Verify and
    Chain now each declare the call they keep, and grading leaves them."""
    client = make_client({
        "retrieval.method": "bm25", **VERIFIED, "rag.grading.enabled": True,
        "rag.grading.min": "LOW", "chunking.maxFiles": 5, "prompt.max.request.size": 1400,
        "llm.maxTokens": 50, "llm.max.calls.per.request": 3,
    })  # fmt: skip
    response = client.post("/ai/rag", json={"query": "glacier survey"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["usage"]["llm_calls"] == 3, body  # one grading, the verification, the answer
    assert any("Does a document above say" in r.prompt for r in llm.requests[-2:])
    assert body["content"]["message"].startswith("Test answer to:")


def test_an_edited_template_s_own_sentence_is_what_the_stream_leaves_out(
    make_client: ClientFactory, llm: LLMScript, tmp_path: Path
) -> None:
    """Issue 67: the scaffolding taken out of an answer is read from the templates as loaded.
    An operator's stuff.j2 says its instruction in other words; a model that copies them
    before its answer has them taken out of what streams, and the stream is the kept answer."""
    folder = tmp_path / "operator-prompts"
    shutil.copytree(ROOT / "prompts", folder)
    stuff = folder / "stuff.j2"
    shipped = "Keep it short: just the words that answer it if they are enough, otherwise a "
    edited = "Be brief and plain: name the year or the person asked about, nothing more."
    assert shipped in stuff.read_text(encoding="utf-8")
    stuff.write_text(
        re.sub(re.escape(shipped) + r"sentence or two\.", edited, stuff.read_text("utf-8")),
        encoding="utf-8",
    )
    client = make_client({"retrieval.method": "bm25", "prompt.templates.dir": folder})
    llm.then(Step(content=f"{edited}\nIt was electrified in 1952, when it stopped burning "
                          "paraffin [1]."))  # fmt: skip
    done, streamed = _asked(client, {"query": LAMP, "stream": True})
    assert edited in llm.requests[-1].prompt, "the operator's template was the one sent"
    assert done["message"] == "It was electrified in 1952, when it stopped burning paraffin [1]."
    assert streamed == done["message"]


def test_a_verification_that_will_not_run_keeps_no_call_from_grading(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 67 review: Verify keeps a call only when it will ask. A caller's JSON answer is
    never verified, so with grading on and llm.max.calls.per.request = 2, grading has its
    call, as with grounding.verify off (before Verify was a stage, grading had it too)."""
    budget = {
        "retrieval.method": "bm25", "rag.grading.enabled": True, "rag.grading.min": "LOW",
        "chunking.maxFiles": 5, "prompt.max.request.size": 1400, "llm.maxTokens": 50,
        "llm.max.calls.per.request": 2,
    }  # fmt: skip
    form = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    body = {"model": "rag", "messages": [{"role": "user", "content": "glacier survey"}],
            "response_format": form}  # fmt: skip
    for settings in ({**budget, **VERIFIED}, budget):
        llm.reset()
        llm.answer = lambda request: '{"answer": "yes"}'
        response = make_client(settings).post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        prompts = [r.prompt for r in llm.requests]
        assert not any("Does a document above say" in prompt for prompt in prompts)
        assert any("You grade how relevant" in prompt for prompt in prompts), prompts


# -- grounding.verify.parallel: the verification sent beside the answer (issue 70) -----------------

SAID = "It was electrified in 1952, when it stopped burning paraffin [1]."


def _until(condition, seconds: float = 4) -> bool:
    """Whether `condition()` came true within `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize(
    ("stream", "pause"),
    [(False, 0.0), (True, 0.0), (True, 1.0)],
    ids=["whole", "streamed-written-first", "streamed-its-word-midway"],
)
def test_a_yes_beside_the_answer_lets_the_held_text_out(
    make_client: ClientFactory, llm: LLMScript, stream: bool, pause: float
) -> None:
    """With an LLM that is not ours (test-model), the verification and the answer's request
    are in flight at once: the answer's text waits for the yes (whether the answer was whole
    before it or still being written), then what streamed is what is kept; the calls, the
    probability and the verification's time are reported as when it is asked first."""
    client = make_client({"retrieval.method": "bm25", **VERIFIED})
    llm.then(
        Step(content="Yes", first_top={"Yes": 0.9, "No": 0.1}, delay=0.6, takes=verification),
        Step(content=SAID, first_top={"It": 0.95, "I": 0.05}, pause_after_first_chunk=pause),
    )
    done, streamed = _asked(client, {"query": LAMP, "stream": stream})
    verifying, answering = _verification_and_answer(llm.requests)
    assert answering.started < verifying.finished, "the answer was asked after the verification"
    assert done["abstained"] is None and done["message"] == SAID, done
    assert streamed == (SAID if stream else "")
    assert done["confidence"]["supported"] == 0.9
    assert done["usage"]["llm_calls"] == 2
    assert done["timings"]["verify"] >= 500, done["timings"]  # its request's time
    if stream:
        assert answering.first_chunk_sent < verifying.finished  # written while it was held
        assert answering.stream_completed


@pytest.mark.parametrize("stream", [False, True])
def test_a_no_beside_the_answer_abandons_it_and_shows_none_of_it(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """The verification says no while the answer is being written: the answer's request is
    abandoned (never read to its end), none of its text was shown, and the answer is the
    not-found sentence, abstained as when the answer is not asked."""
    client = make_client({"retrieval.method": "bm25", **VERIFIED})
    guess = "A guess the documents do not hold, written slowly [1]."
    llm.then(
        Step(content="no", first_top={"no": 0.8, "yes": 0.2}, delay=0.4, takes=verification),
        Step(content=guess, delay=0 if stream else 60, pause_after_first_chunk=60),
    )
    started = time.monotonic()
    done, streamed = _asked(client, {"query": LAMP, "stream": stream})
    assert time.monotonic() - started < 30, "the answer's request was read to its end"
    verifying, answering = _verification_and_answer(llm.requests)
    assert answering.started < verifying.finished
    assert done["message"] == NOT_FOUND_SENTENCES["en"], done
    assert "below grounding.abstain.unsupported (0.5)" in done["abstained"]
    assert done["confidence"]["supported"] == 0.2
    assert done["confidence"]["signal"].startswith("supported:")  # judged by its verification
    assert done["usage"]["llm_calls"] == 2  # the verification, the answer's request abandoned
    if stream:
        assert streamed == NOT_FOUND_SENTENCES["en"]  # nothing of the guess
        assert done["documents"] == []
        assert answering.wait_until_abandoned()
    else:
        assert done["content"]["documents"] == []
        assert _until(lambda: answering.left_while_waiting)


def test_grounding_verify_parallel_false_asks_the_answer_after_the_verification(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "bm25", **IN_TURN})
    llm.then(Step(content="Yes", first_top={"Yes": 0.9, "No": 0.1}, delay=0.4))
    body = client.post("/ai/rag", json={"query": LAMP}).json()
    verifying, answering = llm.requests
    assert verification(verifying) and answering.started >= verifying.finished
    assert body["abstained"] is None and body["usage"]["llm_calls"] == 2, body


@pytest.mark.parametrize("stream", [False, True])
def test_a_verification_that_fails_beside_the_answer_fails_it_as_asked_first(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """The LLM fails the verification: beside the answer, the question fails with the error
    it fails with when the verification is asked first (streamed: that error as the stream's
    end, none of the answer shown), and the answer's request is abandoned."""
    failed = Step(status=500, content="boom", delay=0.3, takes=verification)
    llm.then(failed)
    first = make_client({"retrieval.method": "bm25", **IN_TURN})
    asked_first = first.post("/ai/rag", json={"query": LAMP})
    assert len(llm.requests) == 1  # the answer was not asked
    llm.reset()
    llm.then(failed, Step(content=SAID, delay=0 if stream else 5, pause_after_first_chunk=5))
    beside = make_client({"retrieval.method": "bm25", **VERIFIED})
    question = {"query": LAMP, "stream": stream}
    with beside.stream("POST", "/ai/rag", json=question) as response:
        if stream:
            events = read_events(response)
        else:
            response.read()
    _, answering = _verification_and_answer(llm.requests)
    if stream:
        assert [name for name, _ in events] == ["error"], events  # nothing of the answer
        error = events[0][1]
    else:
        assert response.status_code == asked_first.status_code
        error = response.json()
        assert _until(lambda: answering.left_while_waiting)
    assert asked_first.status_code == 502
    assert error == asked_first.json(), error  # ragTechnicalError, the LLM's reason
    if stream:
        assert answering.wait_until_abandoned()


def test_a_client_leaving_a_held_answer_abandons_both_requests(
    tmp_path: Path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> None:
    """The reader leaves while the answer is held for the verification's word: neither the
    verification nor the answer's request is waited for to its end."""
    llm.then(
        Step(content="Yes", first_top={"Yes": 0.9}, delay=5, takes=verification),
        Step(content=SAID, pause_after_first_chunk=5),
    )
    settings = {**base_properties, "retrieval.method": "bm25", **VERIFIED}
    path = write_properties(tmp_path / "rag.properties", settings)
    with serve_in_thread(create_app(path)) as base:
        body = {"query": LAMP, "stream": True}
        with httpx.stream("POST", f"{base}/ai/rag", json=body, timeout=10) as response:
            assert response.status_code == 200
            assert _until(lambda: any(r.first_chunk_sent for r in llm.requests))
        verifying, answering = _verification_and_answer(llm.requests)
        assert answering.wait_until_abandoned()
        assert _until(lambda: verifying.left_while_waiting)


# -- an echo asked again (issue 69, item 3: grounding.echo.again) ----------------------------------

LAMP_ECHO = "The lighthouse lamp was electrified when it was electrified. [1]"


@pytest.mark.parametrize("stream", [False, True])
def test_an_echo_is_asked_again_and_its_second_answer_kept(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """The model said the question back; asked again after its echo, it names the year: that
    answer is kept (shaped as the first: the phrase), and the echo was never streamed."""
    client = make_client({"retrieval.method": "bm25", "prompt.answer.form": "short"})
    llm.then(Step(content=LAMP_ECHO), Step(content="The lamp was electrified in 1952 [1]"))
    done, streamed = _asked(client, {"query": LAMP, "stream": stream})
    assert done["abstained"] is None, done
    assert re.fullmatch(r"1952 \[1\]", done["message"]), done["message"]
    documents = done["documents"] if stream else done["content"]["documents"]
    assert documents and documents[0]["cited"] is True
    assert streamed == (done["message"] if stream else "")
    first, again = llm.requests[-2:]
    assert again.messages[:-2] == first.messages  # the answer's request, then two turns
    assert again.messages[-2] == {"role": "assistant", "content": LAMP_ECHO}
    assert again.prompt.startswith("That only says the question again") and LAMP in again.prompt
    assert again.body["grammar"] == first.body["grammar"]  # the short answer's form again
    usage = client.post("/ai/rag", json={"query": "How many keepers did the lighthouse have?"})
    assert usage.status_code == 200  # the script is spent: later questions are answered


def test_the_second_answer_kept_reports_its_own_confidence_and_finish(
    client: TestClient, llm: LLMScript
) -> None:
    """The answer kept is the second asking's: its confidence and why it stopped are that
    request's, not the echo's it replaced."""
    echo = Step(content=LAMP_ECHO, first_top={"The": 0.6, "I": 0.4})
    second = Step(content="The lamp was electrified in 1952 [1]", first_top={"The": 0.95,
                  "I": 0.05}, finish_reason="length")  # fmt: skip
    llm.then(echo, second)
    request = {"model": "solr-rag", "messages": [{"role": "user", "content": LAMP}]}
    body = client.post("/v1/chat/completions", json=request).json()
    assert "1952" in body["choices"][0]["message"]["content"], body
    assert body["choices"][0]["finish_reason"] == "length"
    assert llm.requests[-1].body["logprobs"] is True  # asked of the second answer too
    llm.then(echo, second)
    confidence = client.post("/ai/rag", json={"query": LAMP}).json()["confidence"]
    assert confidence["not_found"] == 0.05, confidence
    assert confidence["mean_logprob"] is not None and confidence["mean_logprob"] > -0.2


def test_a_second_answer_in_doubt_is_refused_as_the_first_would_be(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The second answer's first step gave the not-found sentence past
    grounding.abstain.not.found: it is refused, as a first answer that doubtful is."""
    client = make_client({"retrieval.method": "bm25", "grounding.abstain.not.found": 0.3})
    echo = Step(content=LAMP_ECHO, first_top={"The": 0.9, "I": 0.1})
    doubtful = Step(content="The lamp was electrified in 1952 [1]", first_top={"The": 0.55,
                    "I": 0.45})  # fmt: skip
    llm.then(echo, doubtful)
    body = client.post("/ai/rag", json={"query": LAMP}).json()
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["en"], body
    assert body["abstained"].startswith(ECHO), body
    assert "second answer gave the not-found sentence a probability of 0.45" in body["abstained"]
    assert body["confidence"]["not_found"] == 0.45
    assert body["content"]["documents"] == []
    sure = Step(content="The lamp was electrified in 1952 [1]", first_top={"The": 0.8, "I": 0.2})
    llm.then(echo, sure)
    kept = client.post("/ai/rag", json={"query": LAMP}).json()
    assert kept["abstained"] is None and "1952" in kept["content"]["message"], kept


def test_a_refusal_did_not_stop_at_max_tokens_and_a_cut_answer_is_no_echo(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """A doubtful first answer max_tokens cut becomes the not-found sentence, whole: its
    finish_reason is "stop". An answer max_tokens cut before it said anything is shown as
    cut ("length"), not refused as an echo and asked again."""
    client = make_client({"retrieval.method": "bm25", "grounding.abstain.not.found": 0.3})
    request = {"model": "solr-rag", "messages": [{"role": "user", "content": LAMP}]}
    doubtful = Step(content="The lamp was electrified in", first_top={"The": 0.5, "I": 0.5},
                    finish_reason="length")  # fmt: skip
    llm.then(doubtful)
    choice = client.post("/v1/chat/completions", json=request).json()["choices"][0]
    assert choice["message"]["content"] == NOT_FOUND_SENTENCES["en"], choice
    assert choice["finish_reason"] == "stop"  # the first answer's "length" went with it
    cut = Step(content="The lighthouse lamp was", first_top={"The": 0.9, "I": 0.1},
               finish_reason="length")  # fmt: skip
    llm.reset()
    llm.then(cut)
    choice = client.post("/v1/chat/completions", json=request).json()["choices"][0]
    assert choice["finish_reason"] == "length", choice
    assert choice["message"]["content"].startswith("The lighthouse lamp was"), choice
    assert len(llm.requests) == 1  # not asked again


def test_an_echo_said_again_is_refused_and_says_it_was_asked_twice(
    client: TestClient, llm: LLMScript
) -> None:
    llm.then(Step(content=LAMP_ECHO), Step(content=LAMP_ECHO))
    body = client.post("/ai/rag", json={"query": LAMP}).json()
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["en"]
    assert body["abstained"].startswith(ECHO) and "asked again" in body["abstained"], body
    assert body["content"]["documents"] == []
    assert body["usage"]["llm_calls"] == 2


@pytest.mark.parametrize(
    "second",
    [
        Step(content=NOT_FOUND_SENTENCES["en"]),  # the model's own not-found, asked again
        Step(status=500, body='{"error": "boom"}'),  # the LLM fails on the second request
    ],
)
def test_a_second_answer_that_is_no_answer_leaves_the_refusal(
    client: TestClient, llm: LLMScript, second: Step
) -> None:
    llm.then(Step(content=LAMP_ECHO), second)
    response = client.post("/ai/rag", json={"query": LAMP})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["en"]
    assert body["abstained"].startswith(ECHO), body
    failed = second.status != 200
    said = "its second request failed" if failed else "neither did its second answer"
    assert body["abstained"].endswith(said), body
    assert len(llm.requests) == 2
    assert body["usage"]["llm_calls"] == 2  # the second request was sent: it counts


@pytest.mark.parametrize("stream", [False, True])
def test_a_second_asking_past_the_deadline_leaves_the_refusal(
    make_client: ClientFactory, llm: LLMScript, stream: bool
) -> None:
    """The second request would end past request.timeout: it is given up within what the
    request has left, and the refusal stands (the not-found sentence, never a 504 for an
    answer the first request had already given)."""
    client = make_client({"retrieval.method": "bm25", "request.timeout": 3})
    llm.then(Step(content=LAMP_ECHO), Step(content="It was electrified in 1952 [1].", delay=60))
    started = time.monotonic()
    done, streamed = _asked(client, {"query": LAMP, "stream": stream})
    assert time.monotonic() - started < 30  # its request.timeout (3 s), not the LLM's 60
    assert done.get("message") == NOT_FOUND_SENTENCES["en"], done
    assert done["abstained"].startswith(ECHO), done
    assert done["abstained"].endswith("its second request failed"), done
    assert streamed == (NOT_FOUND_SENTENCES["en"] if stream else "")
    assert done["usage"]["llm_calls"] == 2
    assert _until(lambda: llm.requests[-1].left_while_waiting)  # not waited for to its end


def test_no_second_request_when_off_or_when_no_call_is_left(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    off = make_client({"retrieval.method": "bm25", "grounding.echo.again": False})
    llm.then(Step(content=LAMP_ECHO), Step(content="It was electrified in 1952 [1]."))
    body = off.post("/ai/rag", json={"query": LAMP}).json()
    assert body["abstained"].startswith(ECHO) and "asked again" not in body["abstained"]
    assert len(llm.requests) == 1
    llm.reset()
    spent = make_client({"retrieval.method": "bm25", "llm.max.calls.per.request": 1})
    llm.then(Step(content=LAMP_ECHO), Step(content="It was electrified in 1952 [1]."))
    body = spent.post("/ai/rag", json={"query": LAMP}).json()
    assert body["abstained"].startswith(ECHO), body
    assert len(llm.requests) == 1  # the budget's one call was the answer's
