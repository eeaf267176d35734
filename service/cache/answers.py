"""The semantic answer cache: answers kept in Solr (solr.collection.cache), found again by the
meaning of their question, so every worker and replica of the service shares them and they
survive restarts.

An entry is used only for a question whose embedding is within cache.min.similarity of its
own (cosine) and that asks the same thing in the same words (service.cache.sameness:
embeddings put opposites close, "higher" and "lower", "can" and "cannot"),
asked with the same `variant` (configuration, prompts, the caller's groups, id, lang, format,
the request's options: whatever else shapes an answer) while the index is in the same state
(`index_version`: each collection's document count and latest update). Any ingestion or
deletion moves the index version, so no answer outlives the documents it was made from.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from service.cache.sameness import asks_alike
from service.config.settings import CacheSettings, SolrSettings
from service.errors import ServiceError
from service.grounding.check import Grounding
from service.llm.embeddings import EmbeddingsClient
from service.metrics import ANSWER_CACHE
from service.retrieval.cache_entries import CacheEntries
from service.retrieval.solr import SolrClient

log = logging.getLogger(__name__)

CANDIDATES = 3  # nearest entries read per lookup: the nearest may differ in a number
EVICT_EVERY = 10.0  # seconds between two evictions by one process


@dataclass(frozen=True)
class CacheKey:
    """What a lookup matches on, and what a new entry is stored under."""

    question: str
    vector: list[float]
    variant: str
    index_version: str

    @property
    def id(self) -> str:
        """The same question asked again in the same variant replaces its entry."""
        return hashlib.sha256(f"{self.variant}\0{self.question}".encode()).hexdigest()[:32]


class CachedDocument(BaseModel):
    id: str
    title: str
    url: str
    content: str
    number: int


class CachedPayload(BaseModel):
    """What an entry keeps of an answer: what a repeat of it shows."""

    message: str = Field(min_length=1)
    documents: list[CachedDocument]
    grounding: dict[str, Any] | None = None
    finish_reason: str = "stop"


@dataclass(frozen=True)
class CachedAnswer:
    """An entry found: what was answered, when, and how near its question is."""

    payload: CachedPayload
    created: datetime
    similarity: float
    grounding: Grounding | None = None  # the payload's report, read once

    @property
    def age(self) -> float:
        """Seconds since the answer was made."""
        return max((datetime.now(UTC) - self.created).total_seconds(), 0.0)


@dataclass(frozen=True)
class Lookup:
    """A lookup's outcome: the entry found, and the key a new answer is stored under (None
    when the cache could not be asked)."""

    key: CacheKey | None
    hit: CachedAnswer | None


class AnswerCache:
    """>>> found = await cache.lookup(question, variant)   # found.hit, or store under found.key"""

    def __init__(
        self,
        solr: SolrClient,
        embeddings: EmbeddingsClient,
        layout: SolrSettings,
        settings: CacheSettings,
        *,
        evict_every: float = EVICT_EVERY,
    ) -> None:
        self._entries = CacheEntries(solr, layout)
        self._embeddings = embeddings
        self._layout = layout
        self._settings = settings
        self._evict_every = evict_every

    @property
    def collection(self) -> str:
        return self._layout.cache_collection

    async def lookup(self, question: str, variant: str) -> Lookup:
        """The nearest entry that may answer this question, and the key to store its answer
        under otherwise (counted: hit or miss). A cache that fails is a miss without a key,
        logged: the answer is then made as if the cache were off."""
        try:
            vectors, index_version = await asyncio.gather(
                self._embeddings.embed([question], kind="query"), self.index_version()
            )
            key = CacheKey(question, vectors[0], variant, index_version)
            found = await self._nearest(key)
        except ServiceError as error:
            log.warning("answer cache lookup failed, answering without it: %s", error)
            ANSWER_CACHE.labels("miss").inc()
            return Lookup(None, None)
        ANSWER_CACHE.labels("hit" if found else "miss").inc()
        return Lookup(key, found)

    async def index_version(self) -> str:
        """The documents' and passages' state (service.retrieval.cache_entries)."""
        return await self._entries.index_version()

    async def _nearest(self, key: CacheKey) -> CachedAnswer | None:
        docs = await self._entries.nearest(
            key.vector, key.variant, key.index_version, ttl=self._settings.ttl, rows=CANDIDATES
        )
        for doc in docs:
            similarity = 2 * float(doc.get("score", 0.0)) - 1  # Solr scores cosine (1 + cos) / 2
            if similarity < self._settings.min_similarity:
                break
            if not asks_alike(str(doc.get("question", "")), key.question):
                continue
            try:
                payload = CachedPayload.model_validate_json(doc["answer_json"])
                report = payload.grounding
                grounding = Grounding.from_json(report) if report is not None else None
                created = datetime.fromisoformat(str(doc["created_dt"]).replace("Z", "+00:00"))
            except (KeyError, ValueError, TypeError) as error:
                log.warning("answer cache entry %s unreadable (%s): skipped", doc.get("id"), error)
                continue
            return CachedAnswer(payload, created, round(similarity, 4), grounding)
        return None

    async def store(self, key: CacheKey, payload: CachedPayload) -> None:
        """Keeps an answer (found by others within a second: the collection soft-commits
        itself); then, now and then, removes the entries past their time or their number.
        A failure is logged, never the request's."""
        entry = {
            "id": key.id,
            "question": key.question,
            "variant_s": key.variant,
            "index_version_s": key.index_version,
            "created_dt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "answer_json": payload.model_dump_json(),
            self._layout.vector_field: key.vector,
        }
        try:
            await self._entries.add(entry)
            ANSWER_CACHE.labels("stored").inc()
            if _claim_eviction(self.collection, self._evict_every):
                await self.evict(key.index_version)
        except ServiceError as error:
            log.warning("answer cache store failed: %s", error)

    async def evict(self, index_version: str) -> int:
        """Removes the entries made on another index state (they can never match again),
        those older than cache.ttl, and the oldest beyond cache.max.entries; returns how many
        went (counted as evictions)."""
        settings = self._settings
        doomed = await self._entries.evict(
            index_version, ttl=settings.ttl, limit=settings.max_entries
        )
        if doomed:
            ANSWER_CACHE.labels("evicted").inc(doomed)
        return doomed

    async def clear(self) -> int:
        """Every entry removed (DELETE /admin/cache); returns how many there were."""
        return await self._entries.clear()


_last_eviction: dict[str, float] = {}


def _claim_eviction(collection: str, every: float) -> bool:
    """True at most once per `every` seconds per collection in this process."""
    now = time.monotonic()
    if now - _last_eviction.get(collection, float("-inf")) < every:
        return False
    _last_eviction[collection] = now
    return True
