"""What Solr answered a client, counted as it arrives: the searches sent to each collection,
the documents they returned, and how many of those carried a given field (a document's text,
a passage's vector). The client talks to the real Solr; only its answers are counted.

    >>> reads = SolrReads()
    >>> async with httpx.AsyncClient(event_hooks=reads.hooks) as http: ...
    >>> reads.documents["FileShare"], reads.carrying("VectorMain", "vector_384")
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx


class SolrReads:
    """Counts of what Solr's /select answered, by collection."""

    def __init__(self) -> None:
        self.searches: Counter[str] = Counter()
        self.documents: Counter[str] = Counter()
        self.updates: Counter[str] = Counter()
        self._fields: Counter[tuple[str, str]] = Counter()

    @property
    def hooks(self) -> dict[str, list[Any]]:
        """httpx.AsyncClient(event_hooks=...)."""
        return {"response": [self._answered]}

    def carrying(self, collection: str, field: str) -> int:
        """Documents of `collection` returned with `field` (in the document or highlighted)."""
        return self._fields[(collection, field)]

    def clear(self) -> None:
        self.searches.clear()
        self.documents.clear()
        self.updates.clear()
        self._fields.clear()

    async def _answered(self, response: httpx.Response) -> None:
        parts = response.request.url.path.rstrip("/").split("/")
        if len(parts) < 2:
            return
        collection, handler = parts[-2], parts[-1]
        if handler == "update":
            self.updates[collection] += 1
            return
        if handler != "select" or response.status_code != 200:
            return
        await response.aread()
        body = response.json()
        docs = body.get("response", {}).get("docs", [])
        highlighted = body.get("highlighting", {})
        self.searches[collection] += 1
        self.documents[collection] += len(docs)
        for doc in docs:
            fields = set(doc) | set(highlighted.get(str(doc.get("id")), {}))
            for name in fields:
                self._fields[(collection, name)] += 1
