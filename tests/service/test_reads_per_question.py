"""Issue 82, item 3: a question's reads of the service's own collections (a kept conversation,
the answer cache) cost what they find, not what the collection holds after months: no filter
built over every record per question (a filter on NOW, to the millisecond, was a new entry
of Solr's filterCache at every read, made by visiting every live record). Counted by Solr's
own metrics, on the real Solr."""

from __future__ import annotations

import asyncio

import httpx

from service.cache import AnswerCache, CachedPayload
from service.config import Settings
from service.conversations.store import ConversationStore
from service.llm import ChatMessage
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient

READS = 5


def filters_made(solr_url: str, collection: str) -> int:
    """How many filters Solr has built and kept for `collection` since it started."""
    metrics = httpx.get(
        f"{solr_url}/admin/metrics",
        params={"group": "core", "prefix": "CACHE.searcher.filterCache", "wt": "json"},
    ).json()["metrics"]
    cores = [name for name in metrics if f".{collection}." in name]
    assert cores, f"no core of {collection} in {list(metrics)}"
    return sum(
        int(metrics[core]["CACHE.searcher.filterCache"]["cumulative_inserts"]) for core in cores
    )


def test_reading_a_kept_conversation_builds_no_filter_over_every_record(solr_url: str) -> None:
    settings = Settings.of(
        {"solr.url": solr_url, "conversations.enabled": True, "api.keys": "k"}
    ).conversations

    async def scenario() -> int:
        async with httpx.AsyncClient() as http:
            store = ConversationStore(SolrClient(http, solr_url), settings)
            kept = await store.add(
                await store.open("reader", None),
                ChatMessage("user", "Where is the lighthouse?"),
                ChatMessage("assistant", "On the cape."),
            )
            made = filters_made(solr_url, settings.collection)
            for _ in range(READS):
                read = await store.get("reader", kept.id)
                assert read.messages == kept.messages
            await store.listed("reader")
            return filters_made(solr_url, settings.collection) - made

    assert asyncio.run(scenario()) == 0


def test_an_answer_cache_lookup_builds_no_filter_per_question(
    solr_url: str, model_server_url: str
) -> None:
    settings = Settings.of(
        {"solr.url": solr_url, "ai.embeddings.endpoint": f"{model_server_url}/v1/"}
    )

    async def scenario() -> int:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            cache = AnswerCache(
                solr, embeddings_client(http, settings), settings.solr, settings.cache
            )
            question, variant = "How tall is the lighthouse?", "reads-per-question"
            found = await cache.lookup(question, variant)
            assert found.key is not None
            await cache.store(found.key, CachedPayload(message="Forty metres.", documents=[]))
            await asyncio.sleep(1.2)  # the collection's soft commit
            await cache.lookup(question, variant)  # the variant's filters, built once
            made = filters_made(solr_url, settings.solr.cache_collection)
            for _ in range(READS):
                assert (await cache.lookup(question, variant)).hit is not None
            return filters_made(solr_url, settings.solr.cache_collection) - made

    assert asyncio.run(scenario()) == 0


def query_results(solr_url: str, collection: str) -> tuple[int, int]:
    """Solr's queryResultCache for `collection` since it started: (hits, inserts)."""
    metrics = httpx.get(
        f"{solr_url}/admin/metrics",
        params={"group": "core", "prefix": "CACHE.searcher.queryResultCache", "wt": "json"},
    ).json()["metrics"]
    cores = [
        metrics[name]["CACHE.searcher.queryResultCache"]
        for name in metrics
        if f".{collection}." in name
    ]
    assert cores, f"no core of {collection} in {list(metrics)}"
    return (
        sum(int(core["cumulative_hits"]) for core in cores),
        sum(int(core["cumulative_inserts"]) for core in cores),
    )


def test_the_index_state_is_read_from_the_warmed_cache_after_a_commit(solr_url: str) -> None:
    """The answer cache's index state (the newest `_version_` of each collection) sorts every
    document when Solr runs it: the shipped configsets run it as each new searcher warms, so
    the questions after an ingestion find it cached, whatever the index holds."""
    settings = Settings.of({"solr.url": solr_url, "api.keys": "k"})
    collections = ["FileShare", "VectorMain"]

    async def scenario() -> list[tuple[int, int]]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            cache = AnswerCache(
                solr, embeddings_client(http, settings), settings.solr, settings.cache
            )
            before = await cache.index_version()
            probes = {"FileShare": {}, "VectorMain": {"parent_id": "reads-state-probe"}}
            for collection, fields in probes.items():  # an ingestion: a new searcher for each
                await solr.add(collection, [{"id": "reads-state-probe", **fields}], commit=True)
            counted = [query_results(solr_url, c) for c in collections]
            try:
                for _ in range(READS):
                    assert await cache.index_version() != before  # the change is seen
                after = [query_results(solr_url, c) for c in collections]
            finally:
                for collection in collections:
                    await solr.delete_by_query(collection, "id:reads-state-probe")
            return [(h - h0, i - i0) for (h, i), (h0, i0) in zip(after, counted, strict=True)]

    # every read a hit of what the warm-up put there, none inserted by a question
    assert asyncio.run(scenario()) == [(READS, 0), (READS, 0)]
