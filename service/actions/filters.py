"""A request's filters (Datafari 7's `filters`: documents by id, a facet's filter queries) as
the scope they leave: never wider than the caller's."""

from __future__ import annotations

from collections.abc import Sequence

from service.retrieval import Scope
from service.retrieval.facet_filter import documents_matching
from service.snapshot import Snapshot


async def narrowed(
    snapshot: Snapshot,
    scope: Scope,
    ids: Sequence[str] | None,
    queries: Sequence[str],
) -> Scope:
    """The caller's `scope` narrowed to the documents among `ids` (None: any) that pass every
    filter query (a facet's, read by service.retrieval.facet_filter; any other refused)."""
    if ids is None and not queries:
        return scope
    if not queries:
        return scope.within(ids or ())
    layout = snapshot.settings.solr
    documents = await documents_matching(
        snapshot.solr,
        layout.documents_collection,
        layout.documents_map,
        scope,
        queries,
        ids,
    )
    return scope.within(documents)
