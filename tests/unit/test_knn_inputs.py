"""What goes into Solr's kNN query ({!knn f=...}[vector], knn.rescore's
vectorSimilarity(field, [vector])): solr.vector.field, a value that is no field name a
configuration error naming the key, never a query Solr refuses (a 502 at every question) or
reads otherwise; the embeddings API's vector, numbers only (NaN and infinities are its
failure, not Solr's)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from service.config import settings_from_mapping
from service.errors import ConfigError, UpstreamBadResponse
from service.llm.client import LLMOptions
from service.llm.embeddings import EmbeddingsClient


@pytest.mark.parametrize(
    "value", ["vector_384 topK=1", "v}{!func}x", "vec),sum(1", "vector_384 preFilter=$x", " "]
)
def test_a_vector_field_that_is_no_field_name_is_refused(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_from_mapping({"solr.vector.field": value}, source="test", env={})
    assert "solr.vector.field" in str(raised.value)


def test_a_field_name_is_kept() -> None:
    settings = settings_from_mapping({"solr.vector.field": " vector_1536 "}, source="t", env={})
    assert settings.solr.passages_map.field("vector") == "vector_1536"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_vector_that_is_not_all_numbers_is_the_embeddings_apis_failure(number: str) -> None:
    body = f'{{"data": [{{"index": 0, "embedding": [0.5, {number}, 0.25]}}]}}'

    async def embedded() -> list[list[float]]:
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text=body))
        async with httpx.AsyncClient(transport=transport) as http:
            client = EmbeddingsClient(http, LLMOptions("http://embeddings/v1", retries=0))
            return await client.embed(["question"], kind="query")

    with pytest.raises(UpstreamBadResponse, match="not numbers"):
        asyncio.run(embedded())
