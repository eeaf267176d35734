"""A client for any OpenAI-compatible `/embeddings` API (our model server, OpenAI, vLLM...)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Literal

import httpx

from service.config import Settings
from service.errors import UpstreamBadResponse
from service.llm.breaker import CircuitBreaker
from service.llm.client import LLMOptions, OpenAICompatibleClient

BATCH = 64
IN_FLIGHT = 2  # requests at once: the API computes one while the next travels


Kind = Literal["query", "passage"]


class EmbeddingsClient(OpenAICompatibleClient):
    """`embed(texts)` -> one vector per text, in order.

    Texts are sent by length, in requests of 64 (two at a time): a model pads each batch to
    its longest text, so texts of one length together spare it most of the padding. A model
    trained with prefixes (e5's "query: " and "passage: ") gets its prefix before each text:
    `kind` says which (ai.embeddings.query.prefix / passage.prefix)."""

    what = "the embeddings API"
    upstream = "embeddings"

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: LLMOptions,
        breaker: CircuitBreaker | None = None,
        *,
        prefixes: tuple[str, str] = ("", ""),
    ) -> None:
        super().__init__(http, options, breaker)
        self.prefixes = dict(zip(("query", "passage"), prefixes, strict=True))

    async def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> list[list[float]]:
        """One vector per text; `kind`: questions and searches are queries, what is searched
        (passages, and the sentences grounding compares) passages."""
        prefix = self.prefixes[kind]
        if prefix:
            texts = [prefix + text for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def request(batch: list[int]) -> list[list[float]]:
            payload = {
                "input": [texts[i] for i in batch],
                "model": self.options.model,
                "encoding_format": "float",
            }
            async with slots:
                body = await self._post("embeddings", payload)
            return self._vectors(body, len(batch))

        batches = [order[start : start + BATCH] for start in range(0, len(order), BATCH)]
        answers = await asyncio.gather(*(request(batch) for batch in batches))
        vectors: list[list[float]] = [[] for _ in texts]
        for batch, answer in zip(batches, answers, strict=True):
            for i, vector in zip(batch, answer, strict=True):
                vectors[i] = vector
        return vectors

    def _vectors(self, body: object, expected: int) -> list[list[float]]:
        try:
            data = sorted(body["data"], key=lambda item: item["index"])  # type: ignore[index]
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (KeyError, TypeError, ValueError):
            raise UpstreamBadResponse(f"{self._where} answered without data[].embedding") from None
        if len(vectors) != expected:
            raise UpstreamBadResponse(
                f"{self._where} returned {len(vectors)} vectors for {expected} texts"
            )
        # a NaN or an infinity (JSON's NaN, 1e999) makes the sum one: Solr refuses them
        if not all(math.isfinite(sum(vector)) for vector in vectors):
            raise UpstreamBadResponse(f"{self._where} returned vectors that are not numbers")
        return vectors


def embeddings_client(
    http: httpx.AsyncClient,
    settings: Settings,
    *,
    model: str | None = None,
    breaker: CircuitBreaker | None = None,
    retries: int | None = None,
) -> EmbeddingsClient:
    """The embeddings API the settings name (`ai.embeddings.*`), with the LLM's timeouts and
    retries (`retries`: another number, e.g. none for a check)."""
    chosen = model or settings.embeddings.model
    return EmbeddingsClient(
        http,
        LLMOptions(
            endpoint=settings.embeddings.endpoint,
            model=chosen,
            model_chosen_by_caller=model is not None,
            token=settings.embeddings.token.get_secret_value(),
            connect_timeout=settings.llm.timeout_connect,
            read_timeout=settings.llm.timeout_read,
            retries=settings.llm.retries if retries is None else retries,
        ),
        breaker,
        prefixes=settings.embeddings.prefixes(chosen),
    )
