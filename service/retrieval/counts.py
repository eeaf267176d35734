"""How many documents a collection's filters keep, as Solr counted them lately: what a vector
search asks to choose between scoring its scope whole and searching the graph
(service.retrieval.vector). A filter Solr has cached costs it a lookup; the service asks each
filter's count at most once every COUNT_SECONDS, for the clients of one Solr (SchemaCache),
and searches that need the same count at once wait for one request, not one each.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from service.errors import UpstreamBadResponse
from service.flights import Flights

COUNT_SECONDS = 60.0  # how long a filter's count is taken as known
MAX_COUNTS = 4096  # filters whose counts are remembered

Filters = Mapping[str, str | int | float | Sequence[str]]
# a count's collection and a digest of its filters' parameters (a scope may name thousands of
# documents: the key stays 32 bytes)
CountKey = tuple[str, bytes]


class Counts:
    """Each (collection, filters)'s count and when Solr gave it; the counts being asked."""

    def __init__(self) -> None:
        self._held: dict[CountKey, tuple[float, int]] = {}
        self.asking: Flights[CountKey, int] = Flights()

    def get(self, key: CountKey) -> int | None:
        held = self._held.get(key)
        return held[1] if held is not None and time.monotonic() - held[0] < COUNT_SECONDS else None

    def put(self, key: CountKey, count: int) -> None:
        """Kept; when MAX_COUNTS are, the expired go first, then the oldest (so a caller
        cycling through scopes cannot empty the others' counts at once)."""
        now = time.monotonic()
        if len(self._held) >= MAX_COUNTS:
            self._held = {k: v for k, v in self._held.items() if now - v[0] < COUNT_SECONDS}
            while len(self._held) >= MAX_COUNTS:
                del self._held[next(iter(self._held))]
        self._held.pop(key, None)  # to the end: the newest
        self._held[key] = (now, count)


class Counting(Protocol):
    """A Solr client (service.retrieval.solr.SolrClient) and the counts known of its Solr."""

    counts: Counts

    async def select(self, collection: str, params: Filters) -> dict[str, Any]: ...


async def count(solr: Counting, collection: str, filters: Filters) -> int:
    """How many documents of the collection `filters` keep (their `fq` and the parameters
    those name), as Solr counted them at most COUNT_SECONDS ago."""
    key = _key(collection, filters)
    known = solr.counts.get(key)
    if known is not None:
        return known
    return await solr.counts.asking.join(key, lambda: _ask(solr, collection, filters, key))


async def _ask(solr: Counting, collection: str, filters: Filters, key: CountKey) -> int:
    body = await solr.select(collection, {**filters, "defType": "lucene", "q": "*:*", "rows": 0})
    response = body.get("response") if isinstance(body, dict) else None
    found = response.get("numFound") if isinstance(response, dict) else None
    if not isinstance(found, int) or isinstance(found, bool) or found < 0:
        raise UpstreamBadResponse("Solr's count of a search's documents was not a number")
    solr.counts.put(key, found)
    return found


def _key(collection: str, filters: Filters) -> CountKey:
    named = sorted((name, _texts(value)) for name, value in filters.items())
    return collection, hashlib.blake2b(orjson.dumps(named), digest_size=32).digest()


def _texts(value: str | int | float | Sequence[str]) -> list[str]:
    """A parameter's value as texts: its text, or its texts in order."""
    return [str(value)] if isinstance(value, str | int | float) else [str(v) for v in value]
