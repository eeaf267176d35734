"""A collection's fields are read once however many requests ask for them together (the
first questions after a start, hybrid's two searches): one reading, its answer shared; a
caller that gives up (its deadline) leaves the reading to the others. A real Solr, its
requests counted on the client's side."""

from __future__ import annotations

import asyncio

import httpx

from service.retrieval.solr import SchemaCache, SolrClient


def counting_client(solr_url: str, seen: list[str]) -> tuple[httpx.AsyncClient, SolrClient]:
    async def record(request: httpx.Request) -> None:
        if "/schema/" in request.url.path:  # not the nodes' discovery
            seen.append(request.url.path)

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    return http, SolrClient(http, solr_url, schemas=SchemaCache())


async def test_requests_that_come_together_share_one_reading(solr_url: str) -> None:
    seen: list[str] = []
    http, solr = counting_client(solr_url, seen)
    async with http:
        read = await asyncio.gather(*(solr.schema_fields("FileShare") for _ in range(6)))
        again = await solr.schema_fields("FileShare")  # kept: not asked again
    assert all(fields == read[0] for fields in read) and again == read[0]
    assert "id" in read[0].declared
    assert sorted(path.rsplit("/", 1)[-1] for path in seen) == ["dynamicfields", "fields"]


async def test_a_caller_that_gives_up_leaves_the_reading_to_the_others(solr_url: str) -> None:
    seen: list[str] = []
    http, solr = counting_client(solr_url, seen)
    async with http:
        await solr.select("VectorMain", {"q": "*:*", "rows": 0})  # the nodes found first
        leaving = asyncio.create_task(solr.schema_fields("VectorMain"))
        staying = asyncio.create_task(solr.schema_fields("VectorMain"))
        while not seen:  # the reading has begun: both wait on it
            await asyncio.sleep(0.001)
        leaving.cancel()
        fields = await staying
    assert leaving.cancelled()
    assert "id" in fields.declared
    assert len(seen) == 2, seen  # one reading: its two requests
