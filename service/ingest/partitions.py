"""KAITO RAGEngine's named indexes, on Solr: an index is a partition of FileShare and VectorMain.

Each document of an index carries `index_s` (its index's name) and its KAITO `doc_id` inside
its Solr id (`kaito/<index>/<doc_id>`, so two indexes may use one doc_id); its metadata is
kept whole (`kaito_metadata_s`, JSON) and each scalar value is also a filterable field
(`meta_<key>_s`). Searches outside an index never see these documents (retrieval.scope).

Persisting and loading are KAITO's way of surviving restarts; Solr persists every commit, so
they only check that the index exists.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.config.settings import RETRIEVAL_METHODS
from service.errors import BadRequest, IndexNotFound
from service.ingest.extract import SourceDocument
from service.ingest.indexer import Indexer
from service.retrieval import SolrClient, count_documents
from service.retrieval.scope import EVERYTHING, INDEX_FIELD

ID_PREFIX = "kaito/"
METADATA_FIELD = "kaito_metadata_s"
MAX_METADATA_BYTES = 8192
INDEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # fullmatch: no trailing newline
METADATA_KEY = re.compile(r"^[A-Za-z0-9_]{1,64}$")
Metadata = Mapping[str, Any]


@dataclass(frozen=True)
class IndexedDocument:
    """A document of a KAITO index, as its API shows it."""

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    hash_value: str = ""
    is_truncated: bool = False


# names /v1's index_name gives to our own corpus and retrieval methods: a KAITO index of that
# name could never be reached there
RESERVED_NAMES = frozenset({*RETRIEVAL_METHODS, "fileshare", "vectormain", "rag"})


def check_index_name(name: str) -> str:
    if not INDEX_NAME.fullmatch(name):
        raise BadRequest(
            f"index name {name[:80]!r}: use 1 to 64 letters, digits, '_', '.' or '-', starting "
            "with a letter or digit"
        )
    if name.lower() in RESERVED_NAMES:
        raise BadRequest(
            f"index name {name!r} is reserved (/v1's index_name uses it for the main corpus "
            f"or a retrieval method: {', '.join(sorted(RESERVED_NAMES))}); choose another"
        )
    return name


def metadata_filters(metadata_filter: Metadata | None) -> list[str]:
    """Solr filters for KAITO's metadata_filter: every key must equal its value."""
    filters = []
    for key, value in (metadata_filter or {}).items():
        if not METADATA_KEY.match(key) or isinstance(value, dict | list) or value is None:
            raise BadRequest(
                f"metadata_filter: {key[:64]!r} must be a key of letters, digits or '_' with a "
                "text, number or boolean value"
            )
        filters.append(f"{{!term f=meta_{key}_s}}{_scalar(value)}")
    return filters


class Partitions:
    """The partitions (KAITO's indexes): their operations, over FileShare (documents) and the
    indexer's passages."""

    def __init__(self, solr: SolrClient, indexer: Indexer, documents_collection: str) -> None:
        self._solr = solr
        self._indexer = indexer
        self._collection = documents_collection

    async def add(
        self, index: str, documents: Sequence[tuple[str, str, Metadata]]
    ) -> list[IndexedDocument]:
        """Indexes (doc_id, text, metadata) triples; an empty doc_id gets a new one."""
        check_index_name(index)
        shown = [
            IndexedDocument(doc_id or uuid.uuid4().hex, text, dict(metadata), _hash(text))
            for doc_id, text, metadata in documents
        ]
        await self._indexer.run([_source(index, document) for document in shown])
        return shown

    async def names(self, limit: int = 1000) -> list[str]:
        found = await self._solr.select(
            self._collection,
            {"q": f"{INDEX_FIELD}:[* TO *]", "defType": "lucene", "rows": 0, "facet": "true",
             "facet.field": INDEX_FIELD, "facet.limit": limit, "facet.mincount": 1,
             "facet.sort": "index"},
        )  # fmt: skip
        counts = found.get("facet_counts", {}).get("facet_fields", {}).get(INDEX_FIELD, [])
        return [str(name) for name in counts[::2]]

    async def exists(self, index: str) -> bool:
        return await self._count(check_index_name(index)) > 0

    async def require(self, index: str) -> None:
        """Raises NotFound (404) when there is no such index."""
        if not await self.exists(index):
            raise IndexNotFound(index)

    async def documents(
        self,
        index: str,
        *,
        limit: int,
        offset: int,
        max_text_length: int | None = None,
        metadata_filter: Metadata | None = None,
    ) -> tuple[list[IndexedDocument], int]:
        """One page of the index's documents, oldest id first, and how many there are."""
        await self.require(index)
        found = await self._solr.select(
            self._collection,
            {"q": "*:*", "defType": "lucene", "fq": [_in_partition(index),
             *metadata_filters(metadata_filter)], "sort": "id asc", "rows": limit,
             "start": offset, "fl": f"id,content,content_hash,{METADATA_FIELD}"},
        )  # fmt: skip
        response = found["response"]
        return [_shown(index, doc, max_text_length) for doc in response["docs"]], int(
            response["numFound"]
        )

    async def update(
        self, index: str, documents: Sequence[tuple[str, str, Metadata]]
    ) -> tuple[list[IndexedDocument], list[IndexedDocument], list[IndexedDocument]]:
        """(updated, unchanged, not found): only documents the index has are rewritten."""
        await self.require(index)
        current = {doc.doc_id: doc for doc in await self._by_ids(index, [d[0] for d in documents])}
        updated, unchanged, missing = [], [], []
        for doc_id, text, metadata in documents:
            document = IndexedDocument(doc_id, text, dict(metadata), _hash(text))
            before = current.get(doc_id)
            if before is None:
                missing.append(document)
            elif (before.hash_value, before.metadata) == (document.hash_value, document.metadata):
                unchanged.append(document)
            else:
                updated.append(document)
        if updated:
            await self._indexer.run([_source(index, document) for document in updated])
        return updated, unchanged, missing

    async def delete(self, index: str, doc_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """(deleted, not found) doc_ids."""
        await self.require(index)
        present = {doc.doc_id for doc in await self._by_ids(index, doc_ids)}
        deleted = [doc_id for doc_id in doc_ids if doc_id in present]
        if deleted:
            await self._indexer.delete_all([_solr_id(index, doc_id) for doc_id in deleted])
        return deleted, [doc_id for doc_id in doc_ids if doc_id not in present]

    async def drop(self, index: str) -> None:
        """Removes the whole index, its passages included."""
        await self.require(index)
        await self._indexer.delete_matching(_in_partition(index))

    async def _count(self, index: str) -> int:
        return await count_documents(self._solr, self._collection, EVERYTHING.in_partition(index))

    async def metadata(self, index: str, doc_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each of these documents' metadata, by doc_id (those the index holds)."""
        unique = list(dict.fromkeys(doc_ids))
        return {
            document.doc_id: document.metadata for document in await self._by_ids(index, unique)
        }

    async def _by_ids(self, index: str, doc_ids: Sequence[str]) -> list[IndexedDocument]:
        if not doc_ids:
            return []
        found = await self._solr.select(
            self._collection,
            {"q": "*:*", "defType": "lucene", "fq": [_in_partition(index),
             "{!terms f=id separator=\u0001}" + "\u0001".join(_solr_id(index, d) for d in doc_ids)],
             "rows": len(doc_ids), "fl": f"id,content,content_hash,{METADATA_FIELD}"},
        )  # fmt: skip
        return [_shown(index, doc, None) for doc in found["response"]["docs"]]


def doc_id_of(index: str, solr_id: str) -> str:
    """The KAITO doc_id inside a Solr id of this index."""
    return solr_id.removeprefix(f"{ID_PREFIX}{index}/")


def metadata_of(solr_document: Mapping[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(str(solr_document.get(METADATA_FIELD) or "{}"))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _solr_id(index: str, doc_id: str) -> str:
    return f"{ID_PREFIX}{index}/{doc_id}"


def _in_partition(index: str) -> str:
    return f"{{!term f={INDEX_FIELD}}}{index}"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _scalar(value: object) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _source(index: str, document: IndexedDocument) -> SourceDocument:
    metadata = document.metadata
    encoded = json.dumps(metadata, ensure_ascii=False)
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise BadRequest(
            f"metadata of {document.doc_id!r}: at most {MAX_METADATA_BYTES} bytes as JSON"
        )
    fields = {INDEX_FIELD: index, METADATA_FIELD: encoded}
    for key, value in metadata.items():
        if METADATA_KEY.match(key) and isinstance(value, str | int | float | bool):
            fields[f"meta_{key}_s"] = _scalar(value)[:1000]
    return SourceDocument(
        id=_solr_id(index, document.doc_id),
        title=str(metadata.get("title") or metadata.get("file_name") or document.doc_id)[:1000],
        url=str(metadata.get("url") or metadata.get("source") or "")[:4000],
        content=document.text,
        language=str(metadata.get("language") or "")[:16],
        fields=tuple(fields.items()),
    )


def _shown(index: str, doc: Mapping[str, Any], max_text_length: int | None) -> IndexedDocument:
    text = str(doc.get("content") or "")
    truncated = max_text_length is not None and len(text) > max_text_length
    return IndexedDocument(
        doc_id=doc_id_of(index, str(doc["id"])),
        text=text[:max_text_length] if truncated else text,
        metadata=metadata_of(doc),
        hash_value=str(doc.get("content_hash") or _hash(text)),
        is_truncated=truncated,
    )
