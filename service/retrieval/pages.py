"""Every page of a Solr query, by cursorMark: the walk a sync's changed documents, the
passages it reads, its orphan check and a folder's sync each take."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from service.retrieval.solr import SolrClient


async def pages(
    solr: SolrClient, collection: str, params: Mapping[str, Any], *, cursor: str = "*"
) -> AsyncIterator[tuple[dict[str, Any], str]]:
    """Each page's response, with the cursorMark after it, from `cursor` on. `params` hold
    the sort (the uniqueKey last, as cursorMark needs) and `rows`; the walk ends at a page
    shorter than `rows` or whose cursorMark does not move."""
    rows = int(params["rows"])
    while True:
        found = await solr.select(collection, {**params, "cursorMark": cursor})
        next_cursor = found.get("nextCursorMark", cursor)
        yield found, next_cursor
        if next_cursor == cursor or len(found["response"]["docs"]) < rows:
            return
        cursor = next_cursor
