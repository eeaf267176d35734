"""Multi-query retrieval (concurrent searches, fused, deduplicated, original kept, fallback) and
relevance grading (threshold, batches within the budget, all dropped, failures keep chunks)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.retrieval import RetrievedDocument
from service.retrieval.fusion import MultiQueryRetriever
from testing.llm_server import LLMScript, RecordedRequest, Step, default_answer
from testing.servers import serve_in_thread
from testing.service import ClientFactory
from testing.solr_proxy import ProxyLog, create_solr_proxy

SEARCH_DELAY = 0.4


@pytest.fixture
def proxy(solr_url: str) -> Iterator[tuple[str, ProxyLog]]:
    log = ProxyLog()
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        yield f"{base}/solr", log


def queries_answer(*queries: str) -> Step:
    return Step(content=json.dumps({"queries": list(queries)}))


# -- multi-query ------------------------------------------------------------------------------


def test_n_queries_are_searched_at_the_same_time(
    make_client: ClientFactory, llm: LLMScript, proxy: tuple[str, ProxyLog]
) -> None:
    solr, log = proxy
    client = make_client({"solr.url": solr, "rag.queries.count": 3})
    llm.then(queries_answer("lamp keeper dusk", "harbour fog horn"))
    log.delay, log.searches[:] = SEARCH_DELAY, []
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 200, response.text
    searches = [s for s in log.searches if s.collection == "FileShare"]
    assert len(searches) == 3
    # all three were in flight together: each started before any finished
    assert max(s.started for s in searches) < min(s.finished for s in searches)
    body = response.json()
    # the retrieval took less than the searches one after the other would have
    sequential_ms = sum(s.finished - s.started for s in searches) * 1000
    assert body["timings"]["retrieve"] < sequential_ms
    assert "expand" in body["timings"]
    assert body["usage"]["llm_calls"] == 2  # the queries, then the answer
    assert "lighthouse" in llm.requests[0].prompt


def test_the_original_query_is_always_searched_first_and_duplicates_dropped(
    make_client: ClientFactory, llm: LLMScript, proxy: tuple[str, ProxyLog]
) -> None:
    solr, log = proxy
    client = make_client({"solr.url": solr, "rag.queries.count": 3})
    llm.then(queries_answer("LIGHTHOUSE", "lighthouse lamp", "keeper", "one too many"))
    log.searches[:] = []
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    searched = [s.query for s in log.searches if s.collection == "FileShare"]
    assert searched[0] == "lighthouse" or "lighthouse" in searched
    assert sorted(searched) == sorted(["lighthouse", "lighthouse lamp", "keeper"])
    ids = [d["id"] for d in response.json()["content"]["documents"]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! Try: lamp keeper, fog horn",
        '{"queries": []}',
        '{"queries": "lamp keeper"}',
        '{"questions": ["lamp keeper"]}',
        '{"queries": ["<a search query>", "<another search query>"]}',  # the prompt echoed
    ],
)
def test_a_malformed_answer_falls_back_to_the_question(
    make_client: ClientFactory,
    llm: LLMScript,
    proxy: tuple[str, ProxyLog],
    caplog: pytest.LogCaptureFixture,
    answer: str,
) -> None:
    solr, log = proxy
    client = make_client({"solr.url": solr, "rag.queries.count": 3})
    llm.then(Step(content=answer))
    log.searches[:] = []
    with caplog.at_level(logging.WARNING):
        response = client.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 200
    assert [s.query for s in log.searches if s.collection == "FileShare"] == ["lighthouse"]
    assert "multi-query answer unusable" in caplog.text


def test_a_failed_generation_falls_back_too(
    make_client: ClientFactory, llm: LLMScript, proxy: tuple[str, ProxyLog]
) -> None:
    solr, log = proxy
    client = make_client({"solr.url": solr, "rag.queries.count": 2})
    llm.then(Step(content="down", status=500))
    log.searches[:] = []
    assert client.post("/ai/rag", json={"query": "lighthouse"}).status_code == 200
    assert [s.query for s in log.searches if s.collection == "FileShare"] == ["lighthouse"]


def test_multi_query_works_with_hybrid_retrieval(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"rag.queries.count": 2, "retrieval.method": "hybrid", "solr.topK": 4})
    llm.then(queries_answer("keeper of the lamp"))
    body = client.post("/ai/rag", json={"query": "lighthouse"}).json()
    assert body["content"]["documents"][0]["id"] == "lighthouse"


class Ranking:
    """A retriever with fixed rankings per query: the fusion logic alone, no Solr involved."""

    def __init__(self, rankings: dict[str, list[RetrievedDocument]]) -> None:
        self.rankings = rankings

    async def run(self, query: str) -> list[RetrievedDocument]:
        return self.rankings[query]


def doc(identifier: str, content: str) -> RetrievedDocument:
    return RetrievedDocument(id=identifier, title=identifier, url="", content=content)


async def test_fusion_dedupes_by_passage_and_by_content() -> None:
    a, b = doc("a_0", "Lamp lit at dusk."), doc("b_0", "Fog horn every thirty seconds.")
    copy = doc("c_0", "  lamp LIT at   dusk. ")  # same text under another id
    retriever = MultiQueryRetriever(
        Ranking({"q1": [a, b], "q2": [copy, a], "q3": [b]}), k=60, limit=10
    )
    fused = await retriever.run(["q1", "q2", "q3"])
    assert [d.id for d in fused] == ["a_0", "b_0"]


# -- relevance grading -------------------------------------------------------------------------

PASSAGE = re.compile(r'<passage id="(\d+)">\n(.*?)\n', re.S)


def grade_by_title(levels: dict[str, str]) -> object:
    """An LLM answer: grading prompts get grades by passage title, the rest the default."""

    def answer(request: RecordedRequest) -> str:
        if "<passage id=" not in request.prompt:
            return default_answer(request)
        found = PASSAGE.findall(request.prompt)
        grades = [{"id": int(n), "relevance": levels.get(title, "LOW")} for n, title in found]
        return json.dumps({"grades": grades})

    return answer


def is_grading(request: RecordedRequest) -> bool:
    return "<passage id=" in request.prompt


GLACIERS = {"Glacier survey 1": "HIGH", "Glacier survey 2": "LOW", "Glacier survey 3": "MEDIUM"}


@pytest.fixture
def graded(make_client: ClientFactory) -> TestClient:
    return make_client(
        {"rag.grading.enabled": True, "rag.grading.min": "MEDIUM", "chunking.maxFiles": 5}
    )


def test_only_chunks_at_or_above_the_threshold_reach_the_answer(
    graded: TestClient, llm: LLMScript
) -> None:
    llm.answer = grade_by_title(GLACIERS)
    response = graded.post("/ai/rag", json={"query": "glacier survey"})
    assert response.status_code == 200, response.text
    titles = [d["title"] for d in response.json()["content"]["documents"]]
    assert sorted(titles) == ["Glacier survey 1", "Glacier survey 3"]
    final = llm.requests[-1]
    assert not is_grading(final)
    assert "Glacier survey 2" not in final.prompt
    body = response.json()
    assert "grade" in body["timings"]
    assert body["usage"]["llm_calls"] == 2  # one grading request, one answer


def test_high_threshold_keeps_only_high(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"rag.grading.enabled": True, "chunking.maxFiles": 5})  # HIGH
    llm.answer = grade_by_title(GLACIERS)
    titles = [d["title"] for d in client.post("/ai/rag", json={"query": "glacier survey"}).json()[
        "content"
    ]["documents"]]  # fmt: skip
    assert titles == ["Glacier survey 1"]


def test_grading_batches_respect_the_request_size(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    budget = 1400
    client = make_client(
        {
            "rag.grading.enabled": True,
            "rag.grading.min": "LOW",
            "chunking.maxFiles": 5,
            "prompt.max.request.size": budget,
            "llm.maxTokens": 50,
        }
    )
    llm.answer = grade_by_title({})
    response = client.post("/ai/rag", json={"query": "glacier survey"})
    assert response.status_code == 200, response.text
    gradings = [r for r in llm.requests if is_grading(r)]
    assert len(gradings) >= 2
    assert all(r.size <= budget for r in gradings)
    graded_titles = [title for r in gradings for _, title in PASSAGE.findall(r.prompt)]
    assert sorted(graded_titles) == [f"Glacier survey {n}" for n in range(1, 6)]


def test_when_grading_drops_everything_the_answer_is_no_file_found(
    graded: TestClient, llm: LLMScript
) -> None:
    llm.answer = grade_by_title({})  # everything LOW
    response = graded.post("/ai/rag", json={"query": "glacier survey"})
    assert response.status_code == 428
    assert response.json()["content"]["label"] == "ragNoFileFound"
    assert all(is_grading(r) for r in llm.requests)  # no answer was invented


@pytest.mark.parametrize(
    "failure",
    [
        Step(content="grader down", status=500),
        Step(content="All of them look relevant to me."),
        Step(content=json.dumps({"grades": [{"id": 1, "relevance": "HIGH"}]})),  # incomplete
        Step(content=json.dumps({"grades": [{"id": 1, "relevance": "VERY"}]})),
    ],
    ids=["llm-error", "prose", "missing-ids", "bad-level"],
)
def test_a_grading_failure_keeps_the_chunks(
    graded: TestClient, llm: LLMScript, failure: Step, caplog: pytest.LogCaptureFixture
) -> None:
    llm.then(failure)
    with caplog.at_level(logging.WARNING):
        response = graded.post("/ai/rag", json={"query": "glacier survey"})
    assert response.status_code == 200, response.text
    assert len(response.json()["content"]["documents"]) == 5
    assert "keeping 5 chunks ungraded" in caplog.text


def test_the_openai_endpoint_runs_the_same_pipeline(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"rag.queries.count": 2, "rag.grading.enabled": True})
    grades = grade_by_title({"The lighthouse keeper": "HIGH"})

    def answer(request: RecordedRequest) -> str:
        if '"queries"' in request.prompt:
            return json.dumps({"queries": ["keeper lamp"]})
        return grades(request)  # type: ignore[operator]

    llm.answer = answer
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "test-model",
            "messages": [{"role": "user", "content": "lighthouse"}],
            "index_name": "FileShare",
        },
    )
    assert response.status_code == 200, response.text
    kinds = [
        "queries" if '"queries"' in r.prompt else "grade" if is_grading(r) else "answer"
        for r in llm.requests
    ]
    assert kinds == ["queries", "grade", "answer"]
    assert [s["id"] for s in response.json()["sources"]] == ["lighthouse"]
