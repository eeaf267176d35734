"""The answer cache's collection (solr.collection.cache), as Solr holds it: the queries the
semantic cache (service.cache) needs — the nearest entries of one variant and index state,
an entry added, the stale ones evicted — so that only retrieval/ and ingest/ speak to Solr.

    >>> entries = CacheEntries(solr, layout)
    >>> docs = await entries.nearest(vector, variant, index_version, ttl=86400, rows=3)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from service.config.settings import SolrSettings
from service.retrieval.solr import SolrClient

FIELDS = "id,question,answer_json,created_dt,score"


class CacheEntries:
    """The entries of the answer cache's collection, and the index state they were made in."""

    def __init__(self, solr: SolrClient, layout: SolrSettings) -> None:
        self._solr = solr
        self._layout = layout

    @property
    def collection(self) -> str:
        return self._layout.cache_collection

    async def index_version(self) -> str:
        """The documents' and passages' state: count and latest update of each collection.
        An addition or an update raises the latest `_version_`, a deletion the count."""
        layout = self._layout
        collections = (layout.documents_collection, layout.passages_collection)
        states = await asyncio.gather(*(self._state(name) for name in collections))
        return hashlib.sha256("|".join(states).encode()).hexdigest()[:24]

    async def _state(self, collection: str) -> str:
        # the shipped configsets run this very query as each new searcher warms (their
        # solrconfig.xml's listeners): kept alike, a question finds it in Solr's cache
        params = {
            "q": "*:*",
            "defType": "lucene",
            "rows": 1,
            "fl": "_version_",
            "sort": "_version_ desc",
        }
        body = await self._solr.select(collection, params)
        response = body.get("response", {})
        docs = response.get("docs") or [{}]
        return f"{collection}:{response.get('numFound')}:{docs[0].get('_version_')}"

    async def nearest(
        self, vector: list[float], variant: str, index_version: str, *, ttl: int, rows: int
    ) -> list[dict[str, Any]]:
        """The `rows` entries of this variant and index state, younger than `ttl` seconds,
        whose question's vector is nearest `vector`, nearest first (Solr's score: (1 +
        cosine) / 2)."""
        field = self._layout.vector_field
        params = {
            "q": f"{{!knn f={field} topK={rows}}}{json.dumps(vector)}",
            "fq": [
                "{!term f=variant_s v=$cache.variant}",
                "{!term f=index_version_s v=$cache.index}",
                # checked on the entries of the variant and index state, never cached (NOW,
                # to the millisecond, made each lookup a filterCache entry of every entry)
                f"{{!cache=false}}created_dt:[NOW-{int(ttl)}SECONDS TO *]",
            ],
            "cache.variant": variant,
            "cache.index": index_version,
            "fl": FIELDS,
            "rows": rows,
        }
        body = await self._solr.select(self.collection, params)
        return list(body.get("response", {}).get("docs", []))

    async def add(self, entry: dict[str, Any]) -> None:
        """Keeps an entry (found by others within a second: the collection soft-commits)."""
        await self._solr.add(self.collection, [entry])

    async def evict(self, index_version: str, *, ttl: int, limit: int) -> int:
        """Removes the entries made on another index state (they can never match again),
        those older than `ttl` seconds, and the oldest beyond `limit`; returns how many."""
        # the index version is our own hex digest: safe inside a query
        live = f"index_version_s:{index_version} AND created_dt:[NOW-{int(ttl)}SECONDS TO *]"
        stale = f"*:* -({live})"
        counted, kept = await asyncio.gather(
            self._select({"q": stale, "rows": 0}),
            self._select({"q": live, "sort": "created_dt desc", "start": limit, "rows": 1}),
        )
        deletes = [stale] if counted["numFound"] else []
        doomed = int(counted["numFound"])
        if kept["numFound"] > limit and kept["docs"]:
            deletes.append(f"created_dt:[* TO {kept['docs'][0]['created_dt']}]")
            doomed += int(kept["numFound"]) - limit
        if deletes:
            commands = [("delete", {"query": query}) for query in deletes]
            await self._solr.update(self.collection, commands, commit=True)
        return doomed

    async def clear(self) -> int:
        """Every entry removed; returns how many there were."""
        entries = (await self._select({"q": "*:*", "rows": 0}))["numFound"]
        await self._solr.delete_by_query(self.collection, "*:*", commit=True)
        return int(entries)

    async def _select(self, params: dict[str, Any]) -> dict[str, Any]:
        body = await self._solr.select(
            self.collection, {"defType": "lucene", "fl": "created_dt", **params}
        )
        response = body.get("response", {})
        return {"numFound": int(response.get("numFound", 0)), "docs": response.get("docs", [])}
