"""Which documents a search may return: the main corpus or one KAITO index, one parent's
passages, and what the caller may see.

Document-level security (Datafari Enterprise's promise): documents carry `allowed_groups`
(none: public) and `denied_groups`. With security on, every search gets Solr filters for the
caller's groups; a caller with no groups sees public documents only. Values travel quoted in
filter queries built here, never from user text, so they cannot add syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

PUBLIC = "(*:* -allowed_groups:[* TO *])"
# the KAITO index a document belongs to (service.ingest.indexes); none: the main corpus
INDEX_FIELD = "index_s"
MAIN_CORPUS = f"*:* -{INDEX_FIELD}:[* TO *]"


@dataclass(frozen=True)
class Scope:
    """`groups` None means security is off; an empty tuple means an anonymous caller. `index`
    None means the main corpus (no KAITO index's documents); `filters` are Solr filters built
    by the service (metadata filters), never raw user text."""

    parent_id: str | None = None
    groups: tuple[str, ...] | None = None
    index: str | None = None
    filters: tuple[str, ...] = ()

    def with_parent(self, parent_id: str | None) -> Scope:
        return replace(self, parent_id=parent_id)

    def in_index(self, index: str, filters: Sequence[str] = ()) -> Scope:
        """This scope within one KAITO index, with extra filters."""
        return replace(self, index=index, filters=tuple(filters))

    def params(self) -> dict[str, str | list[str]]:
        """Solr parameters: `fq` filters (applied before kNN takes its nearest neighbours)."""
        filters: list[str] = [*self.filters]
        params: dict[str, str | list[str]] = {}
        if self.index is None:
            filters.append(MAIN_CORPUS)
        else:
            filters.append(f"{{!term f={INDEX_FIELD} v=$rag.index}}")
            params["rag.index"] = self.index
        if self.parent_id is not None:
            filters.append("{!term f=parent_id v=$rag.parent}")
            params["rag.parent"] = self.parent_id
        if self.groups is not None:
            filters += visible_to(self.groups)
        if filters:
            params["fq"] = filters
        return params


def visible_to(groups: Sequence[str]) -> list[str]:
    """Solr filters for what members of `groups` may see (none: public documents only)."""
    if not groups:
        return [PUBLIC]
    quoted = " OR ".join(_quote(group) for group in groups)
    return [f"allowed_groups:({quoted}) OR {PUBLIC}", f"*:* -denied_groups:({quoted})"]


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


EVERYTHING = Scope()
"""No restriction: security off, every document."""
