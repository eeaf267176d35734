"""The semantic answer cache in Solr: a question that means the same is answered from the
answer given before, only within the same groups, configuration and index state."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from service.cache import AnswerCache, CachedPayload, CacheKey
from service.config import Settings
from service.errors import SolrLayoutError
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.llm_server import LLMScript, Step
from testing.service import ADMIN_TOKEN, ClientFactory
from tests.service.test_streaming import read_events

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CACHED = {"cache.enabled": True}
ASKED = "Who lit the lighthouse lamp every evening?"
REPHRASED = "Who lit the lamp of the lighthouse every evening?"  # cosine 0.99 with all-MiniLM
ANSWER = "The keeper of the Brannoch lighthouse lit the lamp every evening [1]."


def entries(solr_url: str) -> int:
    body = httpx.get(f"{solr_url}/AnswerCache/select", params={"q": "*:*", "rows": 0}).json()
    return int(body["response"]["numFound"])


def wait_for_entries(solr_url: str, count: int) -> None:
    """Until Solr shows `count` entries (the collection soft-commits every second)."""
    deadline = time.monotonic() + 10
    while entries(solr_url) < count:
        assert time.monotonic() < deadline, f"{entries(solr_url)} cache entries, not {count}"
        time.sleep(0.1)


@pytest.fixture(autouse=True)
def empty_cache(solr_url: str) -> Iterator[None]:
    """Each test starts from an empty cache: entries of another test must not answer here."""
    httpx.post(
        f"{solr_url}/AnswerCache/update",
        params={"commit": "true"},
        json={"delete": {"query": "*:*"}},
    ).raise_for_status()
    yield


def answered_then_cached(client: TestClient, llm: LLMScript, solr_url: str, **body) -> dict:
    """Asks ASKED once (the LLM answers ANSWER), and waits until its answer is kept."""
    llm.then(Step(content=ANSWER))
    first = client.post("/ai/rag", json={"query": ASKED, **body})
    assert first.status_code == 200, first.text
    assert first.json()["cached"] is False
    wait_for_entries(solr_url, 1)
    return first.json()


def test_a_rephrased_question_is_answered_from_the_cache(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    first = answered_then_cached(client, llm, solr_url)
    calls = len(llm.requests)
    again = client.post("/ai/rag", json={"query": REPHRASED})
    assert again.status_code == 200, again.text
    body = again.json()
    assert len(llm.requests) == calls  # no LLM call
    assert body["cached"] is True and 0 <= body["cache_age"] < 60
    assert body["content"] == first["content"]
    assert body["usage"]["llm_calls"] == 0
    assert "cache" in body["timings"] and "retrieve" not in body["timings"]
    metrics = client.get("/metrics").text
    assert 'solr_rag_answer_cache_total{result="hit"}' in metrics


def test_a_question_that_differs_by_a_negation_or_a_number_is_not(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    answered_then_cached(client, llm, solr_url)
    for question in ("Who never lit the lighthouse lamp every evening?", f"{ASKED[:-1]} in 1952?"):
        calls = len(llm.requests)
        body = client.post("/ai/rag", json={"query": question}).json()
        assert body["cached"] is False and len(llm.requests) == calls + 1, question


def test_another_group_never_sees_a_cached_answer(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client({**CACHED, "security.enabled": True})
    staff = {"X-User-Groups": "staff,keepers"}
    llm.then(Step(content=ANSWER))
    assert client.post("/ai/rag", json={"query": ASKED}, headers=staff).json()["cached"] is False
    wait_for_entries(solr_url, 1)
    calls = len(llm.requests)
    others = client.post("/ai/rag", json={"query": ASKED}, headers={"X-User-Groups": "visitors"})
    assert others.json()["cached"] is False and len(llm.requests) == calls + 1
    anonymous = client.post("/ai/rag", json={"query": ASKED})
    assert anonymous.json()["cached"] is False
    same_groups = {"X-User-Groups": "keepers, staff"}  # in another order
    assert client.post("/ai/rag", json={"query": ASKED}, headers=same_groups).json()["cached"]


def test_ingestion_makes_earlier_answers_stale(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    answered_then_cached(client, llm, solr_url)
    try:
        for content in ("A new beacon was built.", "The beacon was rebuilt in stone."):
            document = {"id": "cache-stale", "title": "Beacon", "content": content}
            ingest = client.post("/documents", json={"documents": [document]}, headers=AUTH)
            ingest.raise_for_status()
            body = client.post("/ai/rag", json={"query": ASKED}).json()
            assert body["cached"] is False, content  # the index changed: answered anew
            time.sleep(1.2)  # that answer is kept, for the re-ingest to make it stale
    finally:
        client.delete("/documents/cache-stale", headers=AUTH)


def test_a_configuration_change_makes_earlier_answers_stale(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    answered_then_cached(client, llm, solr_url)
    changed = client.patch("/admin/config", json={"llm.maxTokens": 300}, headers=AUTH)
    assert changed.status_code == 200, changed.text
    assert client.post("/ai/rag", json={"query": ASKED}).json()["cached"] is False


def test_history_lang_format_and_id_are_part_of_the_question(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client({**CACHED, "chat.memory.enabled": True})
    answered_then_cached(client, llm, solr_url)
    history = [{"role": "user", "content": "Tell me about Scotland."}]
    for extra in ({"history": history}, {"lang": "fr"}, {"format": "bulletpoint"}):
        assert client.post("/ai/rag", json={"query": ASKED, **extra}).json()["cached"] is False
    assert client.post("/ai/rag", json={"query": ASKED}).json()["cached"] is True


def test_a_streamed_request_streams_the_cached_text(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    answered_then_cached(client, llm, solr_url)
    calls = len(llm.requests)
    with client.stream("POST", "/ai/rag", json={"query": REPHRASED, "stream": True}) as response:
        events = read_events(response)
    names = [name for name, _ in events]
    assert names[-2:] == ["sources", "done"] and set(names[:-2]) == {"token"}
    assert "".join(data["text"] for name, data in events if name == "token") == ANSWER
    assert events[-1][1]["cached"] is True and len(llm.requests) == calls
    assert events[-2][1]["documents"][0]["id"] == "lighthouse"


def test_the_openai_endpoint_says_cached(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    client = make_client(CACHED)
    request = {"model": "solr-rag", "messages": [{"role": "user", "content": ASKED}]}
    llm.then(Step(content=ANSWER))
    assert "cached" not in client.post("/v1/chat/completions", json=request).json()
    wait_for_entries(solr_url, 1)
    body = client.post("/v1/chat/completions", json=request).json()
    assert body["cached"] is True and body["choices"][0]["message"]["content"] == ANSWER


def test_admins_empty_the_cache(make_client: ClientFactory, llm: LLMScript, solr_url: str) -> None:
    client = make_client(CACHED)
    answered_then_cached(client, llm, solr_url)
    assert client.delete("/admin/cache").status_code == 401
    cleared = client.delete("/admin/cache", headers=AUTH)
    assert cleared.json() == {"status": "OK", "deleted": 1}
    assert client.post("/ai/rag", json={"query": ASKED}).json()["cached"] is False
    off = make_client().delete("/admin/cache", headers=AUTH)
    assert off.status_code == 403 and "cache.enabled=false" in off.json()["content"]["reason"]


def test_health_and_the_connection_test_include_the_cache_collection(
    make_client: ClientFactory,
) -> None:
    client = make_client(CACHED)
    report = client.post("/admin/test-connection", headers=AUTH).json()
    assert report["solr:AnswerCache"]["status"] == "up"
    health = client.get("/health").json()
    assert "solr:AnswerCache" in json.dumps(health)


def test_a_cache_that_fails_is_a_miss_and_the_answer_is_made(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(
        {**CACHED, "solr.collection.cache": "NoSuchCache", "solr.startup.check": False}
    )
    llm.then(Step(content=ANSWER))
    response = client.post("/ai/rag", json={"query": ASKED})
    assert response.status_code == 200 and response.json()["content"]["message"] == ANSWER


def test_a_cache_collection_missing_at_startup_is_named(
    make_client: ClientFactory,
) -> None:
    with pytest.raises(SolrLayoutError, match="NoSuchCache"):
        make_client({**CACHED, "solr.collection.cache": "NoSuchCache"})


def test_eviction_keeps_the_newest_entries_of_the_current_index(
    solr_url: str, model_server_url: str
) -> None:
    settings = Settings.of(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": f"{model_server_url}/v1/",
            "cache.max.entries": 2,
        }
    )

    async def scenario() -> tuple[int, list[str]]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            embeddings = embeddings_client(http, settings)
            cache = AnswerCache(solr, embeddings, settings.solr, settings.cache, evict_every=3600)
            current = await cache.index_version()
            payload = CachedPayload(message="m", documents=[])
            vector = [1.0] + [0.0] * 383
            await cache.store(CacheKey("made on another index", vector, "v", "stale"), payload)
            for number in range(3):
                await asyncio.sleep(0.01)  # distinct creation times
                await cache.store(CacheKey(f"question {number}", vector, "v", current), payload)
            await asyncio.sleep(1.2)  # the collection's soft commit
            evicted = await cache.evict(current)
            kept = await solr.select("AnswerCache", {"q": "*:*", "fl": "question", "rows": 10})
            return evicted, sorted(d["question"] for d in kept["response"]["docs"])

    assert asyncio.run(scenario()) == (2, ["question 1", "question 2"])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cache.min.similarity", "0.2"),  # would answer unrelated questions
        ("cache.min.similarity", "1.5"),
        ("cache.ttl", "0"),
        ("cache.ttl", "1e12"),
        ("cache.max.entries", "0"),
        ("cache.max.entries", "-5"),
        ("solr.collection.cache", ""),
        ("solr.collection.cache", "../admin"),
        ("solr.collection.documents", "File Share"),
    ],
)
def test_absurd_cache_settings_are_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=re.escape(key)):
        Settings.of({key: value})
