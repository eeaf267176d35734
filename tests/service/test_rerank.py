"""The Rerank stage in the service: the real Solr retrieves, a rerank API on a real socket
orders the chunks, the recording LLM is sent the best ones, best first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript
from testing.rerank_server import RerankScript, create_rerank_app, overlap
from testing.servers import dead_address, serve_in_thread
from testing.service import ClientFactory

QUESTION = "Which island is the small quokka marsupial found on?"


@pytest.fixture(scope="module")
def rerank_server() -> Iterator[tuple[str, RerankScript]]:
    script = RerankScript()
    with serve_in_thread(create_rerank_app(script)) as base:
        yield base, script


@pytest.fixture
def reranks(rerank_server: tuple[str, RerankScript]) -> RerankScript:
    rerank_server[1].reset()
    return rerank_server[1]


def reranking(rerank_server: tuple[str, RerankScript], **more: object) -> dict[str, object]:
    return {
        "retrieval.method": "bm25",
        "rerank.enabled": True,
        "rerank.endpoint": f"{rerank_server[0]}/v1/",
        "rerank.model": "test-reranker",
        "rerank.token": "rerank-secret-token",
        "rerank.top.n": 1,
        **more,
    }


def ask(client: TestClient) -> dict:
    response = client.post("/ai/rag", json={"query": QUESTION})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_llm_gets_the_chunks_the_rerank_api_ranks_best_first(
    make_client: ClientFactory,
    rerank_server: tuple[str, RerankScript],
    reranks: RerankScript,
    llm: LLMScript,
) -> None:
    body = ask(make_client(reranking(rerank_server)))
    (sent,) = reranks.requests
    assert sent["query"] == QUESTION and sent["model"] == "test-reranker"
    assert sent["top_n"] == len(sent["documents"])  # every score: one chunk is kept after
    assert reranks.authorizations == ["Bearer rerank-secret-token"]
    texts = sent["documents"]
    assert len(texts) >= 2  # retrieval found more than the one kept
    best, *others = sorted(texts, key=lambda text: -overlap(QUESTION, text))
    sources = body["content"]["documents"]
    assert [source["content"] for source in sources] == [best]
    assert sources[0]["id"] == "quokka-only"
    prompt = llm.requests[0].prompt
    assert best[:40] in prompt and not any(other[:40] in prompt for other in others)
    assert set(body["timings"]) >= {"retrieve", "chunk", "rerank", "chain"}
    assert "rerank-secret-token" not in str(body)


def test_reranking_off_leaves_the_retrieval_order(
    make_client: ClientFactory, rerank_server: tuple[str, RerankScript], reranks: RerankScript
) -> None:
    body = ask(make_client(reranking(rerank_server, **{"rerank.enabled": False})))
    assert reranks.requests == [] and "rerank" not in body["timings"]
    assert len(body["content"]["documents"]) >= 2


def test_a_rerank_api_that_fails_or_is_gone_leaves_the_retrieval_order(
    make_client: ClientFactory,
    rerank_server: tuple[str, RerankScript],
    reranks: RerankScript,
    caplog: pytest.LogCaptureFixture,
) -> None:
    plain = ask(make_client(reranking(rerank_server, **{"rerank.enabled": False})))
    expected = [source["id"] for source in plain["content"]["documents"]]
    reranks.status = 500
    failed = ask(make_client(reranking(rerank_server)))
    assert [source["id"] for source in failed["content"]["documents"]] == expected
    assert len(reranks.requests) == 1  # tried once (no retry of a 500)
    with dead_address() as address:
        gone = ask(
            make_client(reranking(rerank_server, **{"rerank.endpoint": f"http://{address}/"}))
        )
    assert [source["id"] for source in gone["content"]["documents"]] == expected
    assert "reranking skipped" in caplog.text and "rerank-secret-token" not in caplog.text
    assert "127.0.0.1" not in str(gone)


def test_passages_scored_below_the_minimum_are_left_out(
    make_client: ClientFactory,
    rerank_server: tuple[str, RerankScript],
    reranks: RerankScript,
    llm: LLMScript,
) -> None:
    """rerank.min.score between the best passage's score and the others': only it is sent."""
    settings = reranking(rerank_server, **{"rerank.top.n": 10})
    plain = ask(make_client(settings))
    texts = reranks.requests[0]["documents"]
    best, second = sorted((overlap(QUESTION, text) for text in texts), reverse=True)[:2]
    assert best > second and len(plain["content"]["documents"]) >= 2
    cut = (best + second) / 2
    body = ask(make_client({**settings, "rerank.min.score": cut}))
    assert [source["id"] for source in body["content"]["documents"]] == ["quokka-only"]


def test_nothing_scored_at_the_minimum_is_an_abstention_that_says_why(
    make_client: ClientFactory,
    rerank_server: tuple[str, RerankScript],
    reranks: RerankScript,
    llm: LLMScript,
) -> None:
    client = make_client(reranking(rerank_server, **{"rerank.min.score": 1.5}))
    response = client.post("/ai/rag", json={"query": QUESTION})
    assert response.status_code == 428, response.text
    content = response.json()["content"]
    assert content["label"] == "ragNoFileFound"
    best = max(overlap(QUESTION, text) for text in reranks.requests[0]["documents"])
    assert "not in the documents" in content["reason"]
    assert f"{best:.2f}" in content["reason"] and "rerank.min.score (1.5)" in content["reason"]
    assert llm.requests == []  # no LLM call for an abstention
