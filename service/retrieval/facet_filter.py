"""A browser's Solr filter query (Datafari 7's `filters.fq`), read as a facet UI writes it and
written again by us, so that no character of it reaches Solr as syntax we did not choose.

What is accepted: `field:value`, `field:"a phrase"`, `field:[low TO high]` (or `{...}`, `*`
for an open end, date math such as NOW-7DAYS), `field:(v1 OR "v 2")`, and those joined by OR;
one leading `{!tag=name}` (the tag a multi-select facet puts there, meaningless to us) is
dropped. The field must be one the collection declares and indexes, and not a security field.

What is refused, each with a FilterRefused that says why: other local parameters (`{!join}`,
`{!func}`, `{!frange}`...), macros (`${...}`), nested queries (`_query_`), functions
(`_val_`), wildcards, fuzzy or boosted terms, regular expressions, AND/NOT (a facet narrows by
separate filters, which are ANDed), and anything longer than MAX_CHARS or with more than
MAX_VALUES values.

    >>> facet_filter('{!tag=ext}extension:("pdf" OR docx)', schema)
    'extension:("pdf" OR "docx")'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from service.config.field_map import FieldMap, SchemaFields
from service.errors import FilterRefused
from service.retrieval.scope import Scope
from service.retrieval.solr import SolrClient, SolrRefusedRequest

MAX_CHARS = 1_000
MAX_VALUES = 100
_TAG = re.compile(r"\{!tag=[\w.,-]{1,64}\}")
_FIELD = re.compile(r"[A-Za-z_][\w.-]{0,127}")
# a bare value: letters, digits and the punctuation of ids, dates and date math
_BARE = re.compile(r"[\w@./:+-]{1,256}")
_SECURITY = re.compile(r"(allowed|denied)_groups|(allow|deny)_token_\w+")


@dataclass
class _Reader:
    text: str
    at: int = 0
    values: int = 0

    def skip_spaces(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def peek(self, token: str) -> bool:
        self.skip_spaces()
        return self.text.startswith(token, self.at)

    def take(self, token: str) -> bool:
        if self.peek(token):
            self.at += len(token)
            return True
        return False

    def match(self, pattern: re.Pattern[str]) -> str | None:
        self.skip_spaces()
        found = pattern.match(self.text, self.at)
        if found is None:
            return None
        self.at = found.end()
        return found.group()

    def refuse(self, what: str) -> FilterRefused:
        shown = self.text[max(0, self.at - 20) : self.at + 20]
        return FilterRefused(f"filters.fq {what} (near {shown!r}); send field:value filters only")


def facet_filter(text: str, schema: SchemaFields) -> str:
    """The filter, validated against `schema` and written again; FilterRefused otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise FilterRefused("filters.fq: each filter must be a non-empty string")
    if len(text) > MAX_CHARS:
        raise FilterRefused(f"filters.fq: a filter has at most {MAX_CHARS} characters")
    if "${" in text:
        raise FilterRefused("filters.fq: macros (${...}) are not accepted")
    reader = _Reader(text.strip())
    tag = _TAG.match(reader.text)
    if tag:
        reader.at = tag.end()
    if reader.peek("{!"):
        raise reader.refuse("has local parameters ({!...}): only {!tag=...} is accepted")
    wrapped = reader.take("(")
    clauses = [_clause(reader, schema)]
    while _or(reader):
        clauses.append(_clause(reader, schema))
    if wrapped and not reader.take(")"):
        raise reader.refuse("has an unclosed parenthesis")
    reader.skip_spaces()
    if reader.at != len(reader.text):
        raise reader.refuse("goes on past what a facet sends (AND, NOT, wildcards...)")
    written = " OR ".join(clauses)
    if "${" in written:  # `$\{` unescaped: Solr would expand the macro of a value it is sent
        raise FilterRefused("filters.fq: macros (${...}) are not accepted")
    return written


def _or(reader: _Reader) -> bool:
    return reader.take("OR ") or reader.take("||")


def _clause(reader: _Reader, schema: SchemaFields) -> str:
    field = reader.match(_FIELD)
    if field is None or not reader.text.startswith(":", reader.at):
        raise reader.refuse("is not field:value")
    reader.at += 1
    if field in ("_query_", "_val_") or field.startswith("_"):
        raise reader.refuse(f"names {field}: nested queries and functions are not accepted")
    if _SECURITY.fullmatch(field):
        raise reader.refuse(f"names the security field {field}: it is not a facet")
    if not schema.searchable(field):
        raise reader.refuse(f"names {field}, which the collection does not search")
    if reader.take("("):
        values = [_value(reader)]
        while _or(reader):
            values.append(_value(reader))
        if not reader.take(")"):
            raise reader.refuse("has an unclosed parenthesis")
        return f"{field}:({' OR '.join(values)})"
    return f"{field}:{_value(reader)}"


def _value(reader: _Reader) -> str:
    reader.values += 1
    if reader.values > MAX_VALUES:
        raise reader.refuse(f"has more than {MAX_VALUES} values")
    reader.skip_spaces()
    if reader.peek("[") or reader.peek("{"):
        return _range(reader)
    return _quote(_term(reader))


def _range(reader: _Reader) -> str:
    opening = reader.text[reader.at]
    reader.at += 1
    low = _bound(reader)
    if not reader.take("TO "):
        raise reader.refuse("has a range without TO")
    high = _bound(reader)
    reader.skip_spaces()
    closing = reader.text[reader.at : reader.at + 1]
    if closing not in ("]", "}"):
        raise reader.refuse("has an unclosed range")
    reader.at += 1
    return f"{opening}{low} TO {high}{closing}"


def _bound(reader: _Reader) -> str:
    reader.skip_spaces()
    text, at = reader.text, reader.at
    if text[at : at + 1] == "*" and text[at + 1 : at + 2] in (" ", "]", "}"):
        reader.at += 1
        return "*"
    return _quote(_term(reader))


def _term(reader: _Reader) -> str:
    """A phrase's text, or a bare value (no wildcard, fuzzy, boost or regular expression)."""
    reader.skip_spaces()
    if reader.take('"'):
        chars = []
        while reader.at < len(reader.text):
            char = reader.text[reader.at]
            reader.at += 1
            if char == "\\" and reader.at < len(reader.text):
                chars.append(reader.text[reader.at])
                reader.at += 1
            elif char == '"':
                if reader.text[reader.at : reader.at + 1] in ("~", "^"):
                    raise reader.refuse("has a proximity or a boost")
                return "".join(chars)
            else:
                chars.append(char)
        raise reader.refuse("has an unclosed quote")
    bare = reader.match(_BARE)
    if bare is None or reader.text[reader.at : reader.at + 1] in ("*", "?", "~", "^", "/"):
        raise reader.refuse("has a value that is not a word, a phrase or a range")
    return bare


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


MAX_FILTERED = 10_000  # documents a request's filters may leave (their ids travel in one filter)


async def documents_matching(
    solr: SolrClient,
    collection: str,
    fields: FieldMap,
    scope: Scope,
    filters: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    limit: int = MAX_FILTERED,
) -> tuple[str, ...]:
    """The ids of the documents of `collection` the caller may see (`scope`) that pass every
    filter (each a facet's, refused otherwise) and are among `ids` when given: what Datafari
    7's `filters` leave a request. FilterRefused when more than `limit` pass."""
    schema = await solr.schema_fields(collection)
    rewritten = [facet_filter(text, schema) for text in filters]
    restricted = scope if ids is None else scope.within(ids)
    params = restricted.params(fields, schema)
    kept = params.get("fq", [])
    params["fq"] = [*([kept] if isinstance(kept, str) else kept), *rewritten]
    id_field = fields.field("id")
    try:
        body = await solr.select(
            collection,
            {**params, "q": "*:*", "defType": "lucene", "fl": id_field, "rows": limit + 1},
        )
    except SolrRefusedRequest as refused:  # a value its field cannot hold ("x" for a date)
        raise FilterRefused(
            f"filters: a value does not suit its field ({refused.solr_message[:200]})"
        ) from None
    found = [str(doc[id_field]) for doc in body.get("response", {}).get("docs", [])]
    if len(found) > limit:
        raise FilterRefused(
            f"filters: more than {limit} documents pass them; narrow them (another "
            "filters.fq, or filters.id)"
        )
    return tuple(found)
