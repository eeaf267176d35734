"""Which field of a collection holds what the service reads: the field mapping (a validated
value of solr.documents.fields and solr.passages.fields).

A collection the service did not build names its fields its own way (`name_s`, `body_t`,
Datafari's `content_en`...). `solr.documents.fields` and `solr.passages.fields` map each role
the service reads (id, title, content, url...) to the collection's fields:

    title=name_s,content=content_{lang}|content,url=link_s

A role may list several fields, tried in order (`|`); `{lang}` in a field's name is the
language: the request's `lang`, or else the document's own language field, so a French
document is read from `content_fr`, and a document without one from `content`. Multi-valued
fields are read as their values joined by newlines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

LANG = "{lang}"
GENERAL = "general"  # the `{lang}` of the neutral analysis: content_general
LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})?$")
FIELD = re.compile(r"^(?:[A-Za-z_][\w.-]*|[\w.-]*\{lang\}[\w.-]*)$")

DOCUMENT_ROLES = ("id", "title", "content", "url", "language", "modified")
PASSAGE_ROLES = ("id", "title", "text", "url", "language", "modified", "parent", "vector")
# roles used as one field in filters and writes: a list of fields or {lang} makes no sense
SINGLE = ("id", "parent", "vector", "language")
# roles without which the service cannot answer from a collection
REQUIRED = {"documents": ("id", "content"), "passages": ("id", "text", "parent")}

# our configsets: title and content stored as written, and searched in the document's
# language (title_en, content_fr, content_general...: Solr's language identifier writes them)
DOCUMENT_DEFAULTS = (
    "id=id,title=title_{lang}|title,content=content_{lang}|content,url=url,language=language,"
    "modified=last_modified"
)
PASSAGE_DEFAULTS = (
    "id=id,title=title_{lang}|title,text=content_{lang}|content,url=url,language=language,"
    "modified=last_modified,parent=parent_id"
)


@dataclass(frozen=True)
class SchemaFields:
    """The fields a collection's schema declares, its dynamic fields' patterns, and the
    declared fields that are not indexed (stored only: read, never searched)."""

    declared: frozenset[str]
    dynamic: tuple[str, ...] = ()
    unsearchable: frozenset[str] = frozenset()

    def has(self, name: str) -> bool:
        return name in self.declared or any(fnmatchcase(name, p) for p in self.dynamic)

    def searchable(self, name: str) -> bool:
        return self.has(name) and name not in self.unsearchable


@dataclass(frozen=True)
class FieldMap:
    """Each role's fields, in the order they are tried."""

    roles: Mapping[str, tuple[str, ...]]
    named: frozenset[str] = frozenset()  # the roles the key names (not defaults)

    def field(self, role: str) -> str:
        """The one field of a single-field role (id, parent, vector, language)."""
        return self.roles[role][0]

    def fields(self, role: str) -> tuple[str, ...]:
        return self.roles.get(role, ())

    def written(self, role: str) -> str | None:
        """The field a write of the role's text goes to: its first without `{lang}` (a
        language's twin is Solr's to fill), or None."""
        return next((name for name in self.fields(role) if LANG not in name), None)

    def listed(self, *, without: str = "", score: bool = True) -> str:
        """Solr's `fl` for every role (a `{lang}` field as a glob, `content_*`) but the vector
        and `without`, and the score unless `score` is False."""
        names: dict[str, None] = {}
        for role, fields in self.roles.items():
            if role not in ("vector", without):
                names.update((f.replace(LANG, "*"), None) for f in fields)
        return ",".join([*names, *(["score"] if score else [])])

    def read(self, doc: Mapping[str, Any], role: str, lang: str | None = None) -> str:
        """The role's text in a Solr document: its first field that holds some, `{lang}`
        read as `lang`, else the document's language."""
        language = lang or (_text(doc.get(self.field("language"))) if "language" in self.roles
                            else "")  # fmt: skip
        for name in self.fields(role):
            if LANG in name:
                if not LANGUAGE_CODE.match(language):
                    continue
                name = name.replace(LANG, language)
            value = _text(doc.get(name))
            if value:
                return value
        return ""

    def searched(self, role: str, lang: str | None, schema: SchemaFields | None) -> list[str]:
        """The fields a search of the role's text goes to. A `{lang}` field: its twin in
        `lang` (the language of the text searched for) and the neutral `general` one, when
        the schema has that language; else every language it declares, so a question in a
        language of no twin, or of no known language, finds documents in all of them. Then
        the role's plain fields, unless a language's was found (they are the fallback of
        schemas without twins). Fields the schema does not have, or does not index, are left
        out; nothing known of the schema, a `{lang}` field is `lang`'s (if any)."""
        twins: list[str] = []
        plain: list[str] = []
        for name in self.fields(role):
            if LANG not in name:
                if schema is None or schema.searchable(name):
                    plain.append(name)
                continue
            own = name.replace(LANG, lang) if lang and LANGUAGE_CODE.match(lang) else None
            if schema is None:
                twins += [own] if own else []
                continue
            every = sorted(_languages(name, schema))
            general = name.replace(LANG, GENERAL)
            if own in every:
                twins += [own, *([general] if general in every else [])]
            else:
                twins += every
        return list(dict.fromkeys(twins or plain))

    def translated_qf(self, qf: str, lang: str | None, schema: SchemaFields | None) -> str:
        """solr.bm25.qf with each role name (title, content, text) that this map sends
        elsewhere replaced by the role's searched fields, boost kept; other fields as they are."""
        terms: list[str] = []
        for term in qf.split():
            name, _, boost = term.partition("^")
            role = "text" if name == "content" and "text" in self.roles else name
            if role in ("title", "content", "text") and self.fields(role) != (name,):
                suffix = f"^{boost}" if boost else ""
                terms += [f + suffix for f in self.searched(role, lang, schema)]
            else:
                terms.append(term)
        return " ".join(dict.fromkeys(terms)) or qf


@lru_cache(maxsize=64)
def parse_fields(text: str, kind: str) -> FieldMap:
    """A FieldMap from a `role=field|field,...` list over the defaults of `kind` (documents or
    passages); ValueError saying what is wrong. Remembered: the settings' maps are asked for
    on every request (a few lists in all; a FieldMap is never changed)."""
    roles_allowed = DOCUMENT_ROLES if kind == "documents" else PASSAGE_ROLES
    defaults = DOCUMENT_DEFAULTS if kind == "documents" else PASSAGE_DEFAULTS
    roles = _pairs(defaults, roles_allowed)
    named = _pairs(text, roles_allowed)
    if kind == "passages" and "content" in named:  # a passage's content is its text
        named["text"] = named.pop("content")
    return FieldMap({**roles, **named}, frozenset(named))


def _pairs(text: str, allowed: Iterable[str]) -> dict[str, tuple[str, ...]]:
    allowed = tuple(allowed)
    extra = ("content",) if "text" in allowed else ()
    pairs: dict[str, tuple[str, ...]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        role, equals, value = (s.strip() for s in item.partition("="))
        if not equals or role not in (*allowed, *extra):
            raise ValueError(
                f"{item!r} is not role=field; roles: {', '.join(allowed)} (e.g. title=name_s)"
            )
        if role in pairs:
            raise ValueError(f"role {role!r} is mapped twice")
        fields = tuple(f.strip() for f in value.split("|"))
        bad = [f for f in fields if not FIELD.match(f)]
        if bad or not fields:
            raise ValueError(f"{bad[0] if bad else value!r} is not a Solr field name ({role})")
        if role in SINGLE and (len(fields) > 1 or LANG in fields[0]):
            raise ValueError(f"role {role!r} takes one field, without {LANG}")
        pairs[role] = fields
    return pairs


def _languages(pattern: str, schema: SchemaFields) -> set[str]:
    """The declared fields a `{lang}` field names: content_{lang} -> content_en, content_fr,
    content_general."""
    before, _, after = pattern.partition(LANG)
    shape = re.compile(re.escape(before) + rf"([a-z]{{2,3}}|{GENERAL})" + re.escape(after) + "$")
    return {n for n in schema.declared if shape.match(n) and schema.searchable(n)}


def _text(value: object) -> str:
    """Stored fields may come back as lists (multi-valued in a foreign schema)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(item) for item in value)
    return str(value)
