"""Which documents a search may return: the main corpus or one partition (a KAITO index), one
parent's passages, and what the caller may see.

Document-level security (Datafari Enterprise's promise), in one of two models
(`security.model`):
- groups (ours): documents carry `allowed_groups` (none: public) and `denied_groups`;
- manifoldcf (what ManifoldCF's connectors write, and so Datafari): `allow_token_<level>` and
  `deny_token_<level>` at three levels (document, parent, share), `__nosecurity__` (or no
  value) meaning open; a caller sees a document when at each level it is open or one of the
  caller's tokens is allowed, and none of the caller's tokens is denied.
With security on, every search gets Solr filters for the caller's groups (tokens); a caller
with none sees open documents only, and a caller whose groups are unknown (an identity is
configured and it sent none) sees no document that denies any group (token) either: what it
left out might have been a denied group. Values travel quoted in filter queries built here, never
from user text, so they cannot add syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from service.config.field_map import FieldMap, SchemaFields

PUBLIC = "(*:* -allowed_groups:[* TO *])"
# the KAITO index a document belongs to (service.ingest.partitions); none: the main corpus
INDEX_FIELD = "index_s"
MAIN_CORPUS = f"*:* -{INDEX_FIELD}:[* TO *]"
NO_SECURITY = "__nosecurity__"  # ManifoldCF's token of an open level
NOTHING = "-*:*"  # a filter no document passes
SEPARATOR = "\x1f"  # between the ids of `documents` (an id holding it is left out)
LEVELS = ("share", "parent", "document")

SecurityModel = Literal["groups", "manifoldcf"]


@dataclass(frozen=True)
class Scope:
    """`groups` None means security is off; an empty tuple means an anonymous caller.
    `partition` None means the main corpus (no KAITO index's documents); `filters` are Solr
    filters built by the service (metadata filters), never raw user text. `lang`: the
    caller's language, which of a language-suffixed field (solr.documents.fields) is read
    and searched."""

    parent_id: str | None = None
    groups: tuple[str, ...] | None = None
    partition: str | None = None
    filters: tuple[str, ...] = ()
    security: SecurityModel = "groups"
    lang: str | None = None
    # the FileShare documents a search is restricted to (Datafari 7's filters), passages by
    # their parent; None: no restriction
    documents: tuple[str, ...] | None = None
    # the caller sent no identity where one is configured: a document denying any group
    # (token) is hidden from it, whatever its groups
    groups_unknown: bool = False

    def within(self, documents: Sequence[str]) -> Scope:
        """This scope restricted to these documents (and their passages); an empty list
        leaves nothing."""
        kept = set(documents) if self.documents is None else set(documents) & set(self.documents)
        return replace(self, documents=tuple(sorted(kept)))

    def with_parent(self, parent_id: str | None) -> Scope:
        return replace(self, parent_id=parent_id)

    def in_partition(self, partition: str, filters: Sequence[str] = ()) -> Scope:
        """This scope within one partition (a KAITO index), with extra filters."""
        return replace(self, partition=partition, filters=tuple(filters))

    def params(
        self, fields: FieldMap | None = None, schema: SchemaFields | None = None
    ) -> dict[str, str | list[str]]:
        """Solr parameters: `fq` filters (applied before kNN takes its nearest neighbours).
        `fields`: where the collection keeps a passage's parent; `schema`: its fields, when
        known (a collection without KAITO's index field holds the main corpus only)."""
        filters: list[str] = [*self.filters]
        params: dict[str, str | list[str]] = {}
        partitioned = schema is None or schema.has(INDEX_FIELD)
        if self.partition is None:
            if partitioned:
                filters.append(MAIN_CORPUS)
        else:
            filters.append(f"{{!term f={INDEX_FIELD} v=$rag.index}}")
            params["rag.index"] = self.partition
        if self.parent_id is not None:
            parent = fields.field("parent") if fields and "parent" in fields.roles else "parent_id"
            filters.append(f"{{!term f={parent} v=$rag.parent}}")
            params["rag.parent"] = self.parent_id
        if self.groups is not None:
            filters += visible_to(self.groups, self.security, unknown=self.groups_unknown)
        if self.documents is not None:
            filters.append(self._documents_filter(fields, params))
        if filters:
            params["fq"] = filters
        return params

    def _documents_filter(self, fields: FieldMap | None, params: dict[str, str | list[str]]) -> str:
        """The filter of `documents`: by id, or a passage's by its parent's; the ids travel in
        their own parameter, never parsed as syntax."""
        if fields is not None and "parent" in fields.roles:
            field = fields.field("parent")
        else:
            field = fields.field("id") if fields is not None and "id" in fields.roles else "id"
        return terms_query(field, self.documents or (), "rag.documents", params) or NOTHING


def terms_query(
    field: str, values: Sequence[str], key: str, params: dict[str, str | list[str]]
) -> str:
    """A `{!terms}` query for these values of `field` ("" when none is left); the values
    travel in their own parameters (`key`, and `key`.separator), never parsed as syntax, and
    a value holding the separator is left out."""
    kept = [value for value in values if SEPARATOR not in value]
    if not kept:
        return ""
    params[key] = SEPARATOR.join(kept)
    params[f"{key}.separator"] = SEPARATOR
    return f"{{!terms f={field} separator=${key}.separator v=${key}}}"


def visible_to(
    groups: Sequence[str], model: SecurityModel = "groups", *, unknown: bool = False
) -> list[str]:
    """Solr filters for what members of `groups` may see (none: open documents only);
    `unknown`: the caller's groups are not known (it sent no identity), so no document that
    denies any group is seen either."""
    if model == "manifoldcf":
        return _manifoldcf(groups, unknown)
    hidden = ["*:* -denied_groups:[* TO *]"] if unknown else []
    if not groups:
        return [PUBLIC, *hidden]
    quoted = " OR ".join(_quote(group) for group in groups)
    return [f"allowed_groups:({quoted}) OR {PUBLIC}", f"*:* -denied_groups:({quoted})", *hidden]


def _manifoldcf(tokens: Sequence[str], unknown: bool = False) -> list[str]:
    """At each level: open, or one of the tokens allowed; and none of the tokens denied
    (`unknown` tokens: no token denied at all but ManifoldCF's open one, `__nosecurity__`,
    which its Solr connector writes where nothing is denied)."""
    allowed = " OR ".join([NO_SECURITY, *(_quote(token) for token in tokens)])
    filters = []
    for level in LEVELS:
        allow, deny = f"allow_token_{level}", f"deny_token_{level}"
        filters.append(f"{allow}:({allowed}) OR (*:* -{allow}:[* TO *])")
        if tokens:
            denied = " OR ".join(_quote(token) for token in tokens)
            filters.append(f"*:* -{deny}:({denied})")
        if unknown:  # any token before or after the open one, in the field's order
            open_ = _quote(NO_SECURITY)
            filters.append(f"*:* -{deny}:[* TO {open_}}} -{deny}:{{{open_} TO *]")
    return filters


def security_fields(model: SecurityModel) -> tuple[str, ...]:
    """The fields a collection needs for the security model."""
    if model == "manifoldcf":
        return tuple(f"{kind}_token_{level}" for kind in ("allow", "deny") for level in LEVELS)
    return ("allowed_groups", "denied_groups")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


EVERYTHING = Scope()
"""No restriction: security off, every document."""
