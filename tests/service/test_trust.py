"""What a hostile caller, crawler or share gets (issue 45), over HTTP against the real Solr:
no caller value is ever a Solr template, and the surfaces an attacker tried answer as the
documented API says."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory

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
