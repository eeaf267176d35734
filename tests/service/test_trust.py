"""What a hostile caller, crawler or share gets (issue 45), over HTTP against the real Solr:
no caller value is ever a Solr template, and the surfaces an attacker tried answer as the
documented API says."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory
from tests.service.test_lifecycle import wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MACRO_IDS = ("macro/${HOME}.txt", "macro/${q}.txt", "${rag.id}", "macro/${a:${b}}.txt")


@pytest.fixture
def admin(make_client: ClientFactory, solr_url: str) -> Iterator[TestClient]:
    yield make_client()
    remove_documents(solr_url, MACRO_IDS)


def held(solr_url: str, document_id: str) -> int:
    found = httpx.post(
        f"{solr_url}/FileShare/select",
        data={"q": "{!term f=id v=$ident}", "ident": document_id, "defType": "lucene",
              "rows": 0, "wt": "json", "expandMacros": "false"},
    ).json()  # fmt: skip
    return int(found["response"]["numFound"])


def test_a_value_holding_solr_macros_is_never_expanded(admin: TestClient, solr_url: str) -> None:
    """Ids holding ${...} are indexed in one batch, found unchanged the second time (not
    embedded again), and deleted by their id, each exactly."""
    documents = [
        {"id": i, "content": f"Kiln log {n}: fired at dawn."} for n, i in enumerate(MACRO_IDS)
    ]
    first = admin.post("/documents", json={"documents": documents}, headers=ADMIN)
    assert first.status_code == 200, first.text
    assert first.json()["content"]["documents"] == len(MACRO_IDS)
    again = admin.post("/documents", json={"documents": documents}, headers=ADMIN)
    assert again.status_code == 200, again.text
    assert again.json()["content"]["unchanged"] == len(MACRO_IDS)
    assert again.json()["content"]["embedded"] == 0
    listed = admin.get("/documents", params={"id_prefix": "macro/${"}, headers=ADMIN).json()
    assert {d["id"] for d in listed["content"]["documents"]} == set(MACRO_IDS[:2] + MACRO_IDS[3:])
    for document_id in MACRO_IDS:
        assert held(solr_url, document_id) == 1
        deleted = admin.delete(f"/documents/{document_id}", headers=ADMIN)
        assert deleted.status_code == 200, (document_id, deleted.text)
        assert held(solr_url, document_id) == 0
    asked = admin.post("/ai/rag", json={"query": "${rag.id} ${q} kiln"})
    assert asked.status_code < 500, asked.text


@pytest.mark.parametrize("local", ["extractive", "qwen2.5-coder-1.5b-instruct"])
def test_a_model_the_local_llm_does_not_serve_is_a_404_not_an_answer(
    make_client: ClientFactory, llm: LLMScript, local: str
) -> None:
    """The service's own models answer to any name: a request naming another model is
    refused (it was answered by the local model under the name it asked for)."""
    client = make_client({"llm.model": local})
    ask = [{"role": "user", "content": "When was the lighthouse lamp electrified?"}]
    refused = client.post(
        "/v1/chat/completions", json={"model": "no-such-model-xyz", "messages": ask}
    )
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["code"] == "model_not_found"
    assert local in refused.json()["error"]["message"] and not llm.requests
    for model in (local, "rag", ""):
        answered = client.post("/v1/chat/completions", json={"model": model, "messages": ask})
        assert answered.status_code == 200, (model, answered.text)


def test_a_busy_local_model_refuses_at_once_what_it_cannot_answer_in_time(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """Issue 45, item 9: an LLM that answers one question at a time, 0.5 s each, with 3 s to
    answer: of 12 questions at once, those it can answer in time are, the others get a 503
    with Retry-After at once (not a 504 after the deadline), and the breaker stays closed:
    the next question is answered."""
    base = service({"llm.admission": "on", "llm.timeout.read": 3, "request.timeout": 3,
                    "retrieval.method": "bm25"})  # fmt: skip
    llm.one_at_a_time, llm.delay = True, 0.5
    question = {"query": "When was the lighthouse lamp electrified?"}
    with httpx.Client(base_url=base, timeout=30) as http:
        for _ in range(3):  # the service learns the model's pace
            assert http.post("/ai/rag", json=question).status_code == 200

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            return await asyncio.gather(*(http.post("/ai/rag", json=question) for _ in range(12)))

    answers = asyncio.run(burst())
    statuses = [a.status_code for a in answers]
    assert 504 not in statuses and set(statuses) == {200, 503}, statuses
    assert statuses.count(200) >= 2
    refused = next(a for a in answers if a.status_code == 503)
    assert int(refused.headers["Retry-After"]) >= 1
    assert "the LLM is answering" in refused.json()["content"]["reason"]
    after = httpx.post(f"{base}/ai/rag", json=question, timeout=30)
    assert after.status_code == 200, after.text


# -- issue 81, finding 2: admission from the LLM's own queue ---------------------------------


def _questions(count: int) -> list[dict[str, str]]:
    """Questions told apart by a word (the stand-in's requests say whose they are)."""
    return [{"query": f"When was the lighthouse lamp electrified, asks caller{n}?"} for n in
            range(count)]  # fmt: skip


def _reached_the_llm(llm: LLMScript, question: dict[str, str]) -> bool:
    marker = question["query"].rsplit(" ", 1)[-1]  # "caller7?"
    return any(marker in request.prompt for request in llm.requests)


def _burst(base: str, questions: list[dict[str, str]]) -> list[httpx.Response]:
    async def ask() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            return await asyncio.gather(*(http.post("/ai/rag", json=q) for q in questions))

    return asyncio.run(ask())


def _refused_at_once(answers: list[httpx.Response], questions: list[dict[str, str]],
                     llm: LLMScript) -> None:  # fmt: skip
    """Every question answered or refused with a 503 and Retry-After, and no refused one
    ever reached the LLM (refused before it was served, whatever the clock says)."""
    statuses = [a.status_code for a in answers]
    assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses, statuses
    for answer, question in zip(answers, questions, strict=True):
        if answer.status_code == 503:
            assert int(answer.headers["Retry-After"]) >= 1
            assert "the LLM is answering" in answer.json()["content"]["reason"]
            assert not _reached_the_llm(llm, question), question


def test_a_cold_llm_is_sent_no_more_questions_than_it_can_start(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """Issue 81, item 2: a burst reaching an LLM whose pace is not known yet (the service
    just started) was admitted whole (32 at once on `make run`), and none answered in time;
    now a few are, and the others refused at once, before the LLM sees them."""
    base = service({"llm.admission": "on", "llm.timeout.read": 8, "request.timeout": 8,
                    "retrieval.method": "bm25"})  # fmt: skip
    llm.one_at_a_time, llm.delay = True, 0.5  # all of them: 12 s, past their 8 s
    questions = _questions(24)
    _refused_at_once(_burst(base, questions), questions, llm)


def test_another_instance_s_queue_at_the_llm_makes_this_worker_refuse(
    service: ServiceFactory, llm: LLMScript, llm_base_url: str
) -> None:
    """What the LLM server reports of its queue (llama.cpp's /metrics) counts: questions a
    second instance queued there make this one refuse at once (503, Retry-After), though
    it has none in progress itself; once they are gone, it answers again."""
    base = service({"llm.admission": "on", "llm.timeout.read": 8, "request.timeout": 8,
                    "retrieval.method": "bm25"})  # fmt: skip
    llm.one_at_a_time, llm.delay = True, 0.3
    for question in _questions(2):  # the LLM's pace, measured
        assert httpx.post(f"{base}/ai/rag", json=question, timeout=30).status_code == 200
    stop = threading.Event()

    async def other_instance() -> None:
        async with httpx.AsyncClient(base_url=llm_base_url, timeout=60) as http:
            ask = {"messages": [{"role": "user", "content": "another instance's question"}]}
            sent = [asyncio.create_task(http.post("/v1/chat/completions", json=ask))
                    for _ in range(30)]  # fmt: skip
            await asyncio.to_thread(stop.wait)
            for task in sent:  # its callers leave: their connections close
                task.cancel()
            await asyncio.gather(*sent, return_exceptions=True)

    other = threading.Thread(target=asyncio.run, args=(other_instance(),))
    other.start()
    try:
        assert wait_until(lambda: llm.waiting >= 25, seconds=30)
        reads = llm.queue_reads
        question = _questions(3)[2]
        refused = httpx.post(f"{base}/ai/rag", json=question, timeout=30)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert "the LLM is answering" in refused.json()["content"]["reason"]
        assert not _reached_the_llm(llm, question) and llm.queue_reads > reads
    finally:
        stop.set()
        other.join()
    assert wait_until(lambda: llm.waiting == 0 and llm.processing == 0, seconds=30)
    # answered again once the LLM reports its queue gone (read at most every half second)
    assert wait_until(
        lambda: httpx.post(f"{base}/ai/rag", json=question, timeout=30).status_code == 200
    )


def test_timeouts_under_a_full_queue_do_not_open_the_breaker(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """A slow LLM with a queue is not a dead one: questions that time out waiting their turn
    (admission off, so that they are sent) leave the breaker closed, and each abandoned call
    is closed at the LLM (the stand-in sees its client leave, as llama.cpp cancels it)."""
    base = service({"llm.admission": "off", "llm.timeout.read": 1, "request.timeout": 10,
                    "llm.circuit.failures": 2, "llm.circuit.cooldown": 600,
                    "retrieval.method": "bm25"})  # fmt: skip
    llm.one_at_a_time, llm.delay = True, 3.0
    questions = _questions(4)
    statuses = [a.status_code for a in _burst(base, questions)]
    assert statuses == [504] * 4, statuses
    assert wait_until(lambda: all(r.left_while_waiting for r in llm.requests), seconds=30)
    assert wait_until(lambda: llm.waiting == 0 and llm.processing == 0, seconds=30)
    llm.delay = 0.0
    after = httpx.post(f"{base}/ai/rag", json=questions[0], timeout=30)
    assert after.status_code == 200, after.text  # not "circuit breaker"
