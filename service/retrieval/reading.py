"""What a search reads of each document it finds: never more than MAX_READ_CHARS of its text.

A crawler may write a document of any size into a collection we only read (40 MB on one
line), and no answer uses more than a small part of it. Asking Solr for the stored text in
`fl` would bring all of it: tens of megabytes to receive and parse, on the event loop every
other caller waits on. So the text fields are not in `fl`: Solr's highlighter returns them,
asked to highlight nothing (`hl.q` names only the id field), so that it gives each field's
stored value as it is (`hl.alternateField`: the field itself, every value of a multi-valued
field, in order, unescaped), cut after `hl.maxAnalyzedChars` characters: Solr reads no
further and sends no more.

A `{lang}` text field is asked for by the names the schema declares for it; one that a
dynamic field may also hold (which Solr cannot list) stays in `fl`, and its text is cut here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from service.config.field_map import LANG, FieldMap, SchemaFields
from service.retrieval.base import RetrievedDocument

log = logging.getLogger(__name__)

# what a question reads of one document's text: a prompt holds a few thousand characters,
# map-reduce a few dozen prompts
MAX_READ_CHARS = 200_000
MAX_TITLE_CHARS = 1_000
MAX_URL_CHARS = 4_000
NO_HIGHLIGHT = "solr-rag-highlights-nothing"


def text_role(field_map: FieldMap) -> str:
    """The role holding a document's (or a passage's) text."""
    return "text" if "text" in field_map.roles else "content"


def read_params(
    field_map: FieldMap,
    schema: SchemaFields | None,
    max_chars: int = MAX_READ_CHARS,
    *,
    score: bool = True,
) -> dict[str, str]:
    """`fl` (every role's fields but the text's, and the score unless `score` is False) and
    the highlighting parameters that return the text fields' stored values, at most
    `max_chars` characters of each."""
    role = text_role(field_map)
    text = field_map.fields(role)
    highlighted = _highlightable(text, schema)
    listed = [field_map.listed(without=role, score=score)]
    listed += [f.replace(LANG, "*") for f in text if f not in highlighted]
    params = {"fl": ",".join(listed)}
    if not highlighted:
        return params
    id_field = field_map.field("id")
    params |= {
        "hl": "true",
        "hl.method": "original",
        "hl.fl": ",".join(highlighted),
        "hl.q": f"{{!term f={id_field}}}{NO_HIGHLIGHT}",
        "hl.qparser": "lucene",
        "hl.requireFieldMatch": "true",
        "hl.highlightAlternate": "false",
        "hl.preserveMulti": "true",
        "hl.encoder": "",
        "hl.fragsize": "0",
        "hl.maxAnalyzedChars": str(max_chars),
        "hl.maxAlternateFieldLength": str(max_chars),
    }
    for name in highlighted:
        params[f"f.{name}.hl.alternateField"] = name
    return params


def id_params(field_map: FieldMap) -> dict[str, str]:
    """`fl` of a ranking's candidates read by id alone (a passage's parent too) and score: no
    text, which costs Solr a stored-field read and a highlighter pass per document (hybrid's
    200 candidates: 150 ms of its 180, bench.scale); the texts of those kept are read
    afterwards (retrieval/texts.py)."""
    fields = [field_map.field("id")]
    if "parent" in field_map.roles:
        fields.append(field_map.field("parent"))
    return {"fl": ",".join([*fields, "score"])}


def _highlightable(fields: tuple[str, ...], schema: SchemaFields | None) -> list[str]:
    """The text fields Solr can be asked by name: plain ones, and a `{lang}` field's names
    the schema declares (unless a dynamic field could hold others)."""
    names: list[str] = []
    for name in fields:
        if LANG not in name:
            names.append(name)
            continue
        if schema is None or any(fnmatchcase(name.replace(LANG, "xx"), p) for p in schema.dynamic):
            continue  # names Solr cannot list: read through fl
        pattern = name.replace(LANG, "*")
        names += sorted(n for n in schema.declared if fnmatchcase(n, pattern))
    return names


def documents_from_response(
    body: Mapping[str, Any],
    field_map: FieldMap,
    lang: str | None = None,
    max_chars: int = MAX_READ_CHARS,
) -> list[RetrievedDocument]:
    """Solr's documents (or passages) as the service reads them, through the field map: the
    text from the highlighting (or `fl`), each text bounded, and titles and addresses too."""
    docs = body.get("response", {}).get("docs", [])
    texts = _highlighted_texts(body, docs, field_map)
    read = field_map.read
    found = []
    for doc, text in zip(docs, texts, strict=True):
        merged = {**doc, **text}
        found.append(
            RetrievedDocument(
                id=read(doc, "id"),
                title=read(doc, "title", lang)[:MAX_TITLE_CHARS],
                url=read(doc, "url", lang)[:MAX_URL_CHARS],
                content=_bounded(
                    read(merged, text_role(field_map), lang), read(doc, "id"), max_chars
                ),
                score=float(doc.get("score", 0.0)),
                parent_id=read(doc, "parent") or None,
            )
        )
    return found


def _highlighted_texts(
    body: Mapping[str, Any], docs: list[dict[str, Any]], field_map: FieldMap
) -> list[dict[str, Any]]:
    """Each document's highlighted text fields (Solr keys them by the schema's unique key,
    in the documents' order)."""
    highlighting = body.get("highlighting")
    if not isinstance(highlighting, dict):
        return [{} for _ in docs]
    entries = list(highlighting.values())
    if len(entries) == len(docs):
        return [entry if isinstance(entry, dict) else {} for entry in entries]
    id_field = field_map.field("id")
    return [highlighting.get(str(doc.get(id_field)), {}) for doc in docs]


def _bounded(text: str, document_id: str, max_chars: int) -> str:
    """`text` up to `max_chars` characters, said in the log when it was cut (by Solr, a
    little past the bound, or here)."""
    if len(text) < max_chars:
        return text
    log.warning(
        "document %r: its text is cut at %s characters (read no further)",
        document_id[:200],
        f"{max_chars:,}",
    )
    return text[:max_chars]
