"""Which documents a search may return: one parent's passages, and what the caller may see.

Document-level security (Datafari Enterprise's promise): documents carry `allowed_groups`
(none: public) and `denied_groups`. With security on, every search gets Solr filters for the
caller's groups; a caller with no groups sees public documents only. Values travel quoted in
filter queries built here, never from user text, so they cannot add syntax.
"""

from __future__ import annotations

from dataclasses import dataclass

PUBLIC = "(*:* -allowed_groups:[* TO *])"


@dataclass(frozen=True)
class Scope:
    """`groups` None means security is off; an empty tuple means an anonymous caller."""

    parent_id: str | None = None
    groups: tuple[str, ...] | None = None

    def with_parent(self, parent_id: str) -> Scope:
        return Scope(parent_id, self.groups)

    def params(self) -> dict[str, str | list[str]]:
        """Solr parameters: `fq` filters (applied before kNN takes its nearest neighbours)."""
        filters: list[str] = []
        params: dict[str, str | list[str]] = {}
        if self.parent_id is not None:
            filters.append("{!term f=parent_id v=$rag.parent}")
            params["rag.parent"] = self.parent_id
        if self.groups is not None:
            if self.groups:
                quoted = " OR ".join(_quote(group) for group in self.groups)
                filters.append(f"allowed_groups:({quoted}) OR {PUBLIC}")
                filters.append(f"*:* -denied_groups:({quoted})")
            else:
                filters.append(PUBLIC)
        if filters:
            params["fq"] = filters
        return params


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


EVERYTHING = Scope()
"""No restriction: security off, every document."""
