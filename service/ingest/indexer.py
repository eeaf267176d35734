"""Writing SourceDocuments into FileShare and their passages into VectorMain.

Nothing is embedded twice: a document whose indexed form (fields, text, passage settings and
embeddings model: its `index_hash_s`) is what FileShare already holds is skipped, and a changed
document's passages keep the vectors Solr already stores for the same text under the same
model (`embedding_hash_s`), so only new text is embedded. `force` re-embeds everything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from service.config import Settings
from service.config.field_map import FieldMap
from service.ingest.extract import SourceDocument
from service.ingest.passages import Passage, PassageSplitter
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.bm25 import OUR_DOCUMENTS
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.layout import ANALYSIS_VERSION, EMBEDDING_FIELD, EMBEDDING_MODEL
from service.retrieval.pages import pages
from service.retrieval.scope import INDEX_FIELD, MAIN_CORPUS
from service.retrieval.solr import SolrClient

# what a listed document shows: our name, the role that holds it (solr.documents.fields)
LISTED_ROLES = {
    "id": "id",
    "title": "title",
    "url": "url",
    "language": "language",
    "last_modified": "modified",
}
GROUP_FIELDS = "allowed_groups,denied_groups"


INDEX_HASH = "index_hash_s"  # FileShare: what a document was indexed as
SOURCE_FIELD = "source_s"  # where a document came from: the folder (its name) or "upload"
EMBEDDING_HASH = "embedding_hash_s"  # VectorMain: the model and text a passage's vector is of
ID_SEPARATOR = "\x1f"  # between ids in a terms query; an id holding it is never looked up


@dataclass(frozen=True)
class IngestSummary:
    """What an ingestion did: documents written (and those skipped as unchanged), passages
    written, and how many of them had to be embedded (the rest kept their vectors)."""

    documents: int
    passages: int
    seconds: float
    unchanged: int = 0
    embedded: int = 0
    # (id, the source it came from) of documents another source's document replaced
    replaced: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        rate = (self.documents + self.unchanged) / self.seconds if self.seconds else 0.0
        return (
            f"{self.documents} documents and {self.passages} passages ({self.embedded} "
            f"embedded), {self.unchanged} unchanged, in {self.seconds:.1f}s "
            f"({rate:.1f} documents/s)"
        )

    def replacements(self, shown: int = 10) -> str:
        """ "2 documents of another source replaced: notes/pass.txt (was from python-reference),
        ..."; empty when none was."""
        if not self.replaced:
            return ""
        listed = ", ".join(f"{i} (was from {source})" for i, source in self.replaced[:shown])
        more = f" and {len(self.replaced) - shown} more" if len(self.replaced) > shown else ""
        return f"{len(self.replaced)} document(s) of another source replaced: {listed}{more}"


@dataclass(frozen=True)
class IngestProgress:
    """How far an ingestion is, after each write: documents done (written or unchanged) of
    `total`, passages written and embedded so far, seconds since it started."""

    documents: int
    total: int
    passages: int
    embedded: int
    seconds: float


Progress = Callable[[IngestProgress], None]


@dataclass
class _Group:
    """Changed documents on their way to Solr: FileShare fields, passages, their vectors."""

    documents: list[tuple[SourceDocument, dict[str, object]]] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    checked: int = 0  # documents of the input done once this group is written (unchanged too)
    commands: list[tuple[str, object]] = field(default_factory=list)  # VectorMain's update
    embedded: int = 0


@dataclass(frozen=True)
class PassageIndex:
    """Where and how passages are written: the collection, the splitter, the embeddings
    (`mode`: whether Solr embeds them as they arrive; None: the service does)."""

    collection: str
    splitter: PassageSplitter
    vector_field: str
    embeddings: EmbeddingsClient | None
    model: str = ""  # the embeddings model: a vector is reused only for the same one
    mode: EmbeddingMode | None = None

    def embedding_hash(self, passage: Passage) -> str:
        """What a stored vector is reused for: the model, the field and the text embedded
        (its prefix too: e5's "passage: "; none, as before prefixes, for other models)."""
        prefix = self.embeddings.prefixes["passage"] if self.embeddings else ""
        return sha256_of(self.model, self.vector_field, prefix + passage.embedding_text)


class Indexer:
    """Adds documents to FileShare and replaces their passages in VectorMain, in batches.

    A document's old passages are deleted and its new ones added in the same update request,
    and nothing is visible before the final commit (the configsets open no searcher on their
    own), so a search never sees a mix of old and new passages, nor stale ones.

    A pipeline of two stages: while one group of documents is written to Solr, the next is
    checked, split and embedded. A group holds about `group_passages` passages, so the
    embeddings API gets long lists it can sort by length (less padding) and Solr few requests.

    >>> await Indexer(solr, "FileShare", passages=PassageIndex(...)).run(documents)
    """

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        *,
        passages: PassageIndex | None = None,
        batch_size: int = 50,
        group_passages: int = 512,
        force: bool = False,
    ) -> None:
        """`batch_size`: documents checked against FileShare at once; `force`: write and embed
        every document, even those Solr holds unchanged."""
        self._solr = solr
        self._collection = collection
        self._passages = passages
        self._batch_size = batch_size
        self._group_passages = group_passages
        self._force = force
        # (id, the source it came from) of documents a document of another source replaced
        self.replaced: list[tuple[str, str]] = []

    async def run(
        self, documents: Sequence[SourceDocument], progress: Progress | None = None
    ) -> IngestSummary:
        started = time.perf_counter()
        # the same id twice: the last version wins, passages included (ids are unique keys)
        documents = list({document.id: document for document in documents}.values())
        written = passages = embedded = 0
        writing: asyncio.Task[None] | None = None

        async def write(group: _Group) -> None:
            nonlocal written, passages, embedded
            await self._write(group)
            written += len(group.documents)
            passages += len(group.passages)
            embedded += group.embedded
            if progress:
                seconds = time.perf_counter() - started
                progress(IngestProgress(group.checked, len(documents), passages, embedded, seconds))

        try:
            async for group in self._groups(documents):
                await self._embed(group)  # while the group before is written
                if writing is not None:
                    await writing
                writing = asyncio.create_task(write(group))
            if writing is not None:
                await writing
        finally:  # an error of either stage ends both; the first raised is the one seen
            if writing is not None:
                writing.cancel()
                await asyncio.wait([writing])
                if not writing.cancelled():
                    writing.exception()  # retrieved: no "never retrieved" warning
        # even with nothing written: what a failed run left uncommitted (on a replica that has
        # recovered it, say) becomes visible on every replica alike
        await self.commit()
        seconds = time.perf_counter() - started
        replaced = tuple(self.replaced)
        return IngestSummary(
            written, passages, seconds, len(documents) - written, embedded, replaced
        )

    async def _groups(self, documents: Sequence[SourceDocument]) -> AsyncIterator[_Group]:
        """The changed documents with their passages, about `group_passages` passages a group;
        a batch of unchanged documents yields an empty group (progress)."""
        group, reported = _Group(), 0
        for start in range(0, len(documents), self._batch_size):
            batch = documents[start : start + self._batch_size]
            changed = {id(document): fields for document, fields in await self._changed(batch)}
            for position, document in enumerate(batch, start=start + 1):
                if id(document) not in changed:
                    continue
                group.documents.append((document, changed[id(document)]))
                if self._passages:
                    group.passages += self._passages.splitter.run(document)
                if len(group.passages) >= self._group_passages:
                    group.checked = reported = position
                    yield group
                    group = _Group()
            checked = start + len(batch)
            if checked > reported and (not group.documents or checked == len(documents)):
                group.checked = reported = checked
                yield group
                group = _Group()

    async def _changed(
        self, batch: Sequence[SourceDocument]
    ) -> list[tuple[SourceDocument, dict[str, object]]]:
        """The documents of `batch` FileShare does not hold as they are (all with `force`),
        each with its FileShare fields."""
        indexed = [(document, self._indexed(document)) for document in batch]
        stored = await self._stored(
            self._collection, "id", [d.id for d in batch], INDEX_HASH, SOURCE_FIELD
        )
        sources = {doc["id"]: doc.get(SOURCE_FIELD) for doc in stored}
        for document, fields in indexed:
            before, now = sources.get(document.id), fields.get(SOURCE_FIELD)
            if before and now and before != now:
                self.replaced.append((document.id, str(before)))
        if self._force:
            return indexed
        held = {doc["id"]: doc.get(INDEX_HASH) for doc in stored}
        return [(d, fields) for d, fields in indexed if held.get(d.id) != fields[INDEX_HASH]]

    async def count(self, document_id: str | None = None) -> int:
        """Documents in FileShare: all of them, or those with this id (0 or 1)."""
        query = "*:*" if document_id is None else "{!term f=id}" + document_id
        found = await self._solr.select(
            self._collection, {"q": query, "defType": "lucene", "rows": 0}
        )
        return int(found["response"]["numFound"])

    async def page(
        self,
        *,
        limit: int,
        offset: int,
        filters: Sequence[str] = (),
        fields: FieldMap = OUR_DOCUMENTS,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of FileShare's main corpus (not KAITO indexes), by id, with the `filters`
        (Solr filters the service built), and how many documents match; each document's
        fields as `fields` maps them, under our names."""
        schema = await self._solr.schema_fields(self._collection)
        corpus = [MAIN_CORPUS] if schema.has(INDEX_FIELD) else []
        found = await self._solr.select(
            self._collection,
            {"q": "*:*", "defType": "lucene", "fq": [*corpus, *filters],
             "sort": f"{fields.field('id')} asc", "rows": limit, "start": offset,
             "fl": f"{fields.listed()},{GROUP_FIELDS}"},
        )  # fmt: skip
        documents = [
            {
                **{name: fields.read(doc, role) for name, role in LISTED_ROLES.items()},
                **{name: doc[name] for name in GROUP_FIELDS.split(",") if name in doc},
            }
            for doc in found["response"]["docs"]
        ]
        return documents, int(found["response"]["numFound"])

    async def ids_from(self, source: str, page: int = 10_000) -> list[str]:
        """The ids of the documents FileShare holds from one source (a folder's name)."""
        ids: list[str] = []
        params = {"q": f"{{!term f={SOURCE_FIELD}}}{source}", "defType": "lucene", "fl": "id",
                  "sort": "id asc", "rows": page}  # fmt: skip
        async for found, _ in pages(self._solr, self._collection, params):
            ids += [doc["id"] for doc in found["response"]["docs"]]
        return ids

    async def delete_gone(self, source: str, present: set[str]) -> int:
        """Removes the documents of `source` (and their passages) whose id is not in
        `present`, the ids its files have now (a folder's sync); how many went."""
        gone = [i for i in await self.ids_from(source) if i not in present]
        if gone:
            await self.delete_all(gone)
        return len(gone)

    async def delete(self, document_id: str) -> int | None:
        """Removes a document and its passages: how many passages went with it; None when
        FileShare had no such document."""
        if not await self.count(document_id):
            return None
        passages = 0
        if self._passages:
            found = await self._solr.select(
                self._passages.collection,
                {"q": _parent_query(document_id)["query"], "defType": "lucene", "rows": 0},
            )
            passages = int(found["response"]["numFound"])
        await self.delete_all([document_id])
        return passages

    async def delete_all(self, document_ids: Sequence[str]) -> None:
        """Removes these documents and their passages, in one update each and one commit."""
        await self._solr.update(self._collection, [("delete", {"id": i}) for i in document_ids])
        if self._passages:
            await self._solr.update(
                self._passages.collection, [("delete", _parent_query(i)) for i in document_ids]
            )
        await self.commit()

    async def delete_matching(self, query: str) -> None:
        """Removes the documents and the passages `query` (Lucene syntax, built by the
        service) matches."""
        await self._solr.update(self._collection, [("delete", {"query": query})])
        if self._passages:
            await self._solr.update(self._passages.collection, [("delete", {"query": query})])
        await self.commit()

    async def commit(self) -> None:
        await self._solr.commit(self._collection)
        if self._passages:
            await self._solr.commit(self._passages.collection)

    def _indexed(self, document: SourceDocument) -> dict[str, object]:
        """The FileShare document, with the hash of all that its indexing depends on: not its
        date, so a file touched but not changed is not written again."""
        fields = document.to_solr()
        index = self._passages
        settings = (index.splitter.settings, index.model, index.vector_field) if index else ()
        settings = (*settings, ANALYSIS_VERSION)  # Solr's analysis changed: written again
        hashed = {key: value for key, value in fields.items() if key != "last_modified"}
        fields[INDEX_HASH] = sha256_of(json.dumps([hashed, settings], sort_keys=True, default=str))
        return fields

    async def _stored(
        self, collection: str, key: str, values: Sequence[str], *fields: str
    ) -> list[dict[str, Any]]:
        """The `key` and `fields` of the documents of `collection` whose `key` is one of
        `values`."""
        values = [value for value in values if ID_SEPARATOR not in value]
        if not values:
            return []
        query = {
            # quoted: Java counts the separator as white space
            "q": f"{{!terms f={key} separator='{ID_SEPARATOR}'}}" + ID_SEPARATOR.join(values),
            "defType": "lucene",
            "fl": ",".join([key, *fields]),
            "rows": 100_000,  # a group's passages: bounded by its documents' sizes
        }
        found = await self._solr.select(collection, query)
        return list(found["response"]["docs"])

    async def _embed(self, group: _Group) -> None:
        """The group's VectorMain update: its documents' old passages deleted, the new ones
        added with their vectors; a passage whose text and model Solr already holds keeps its
        stored vector, the others are embedded: here, or by Solr as they arrive (solr mode:
        they are sent without one)."""
        index = self._passages
        if index is None or not group.documents:
            return
        passages = group.passages
        hashes = [index.embedding_hash(p) for p in passages]
        vectors: list[list[float] | None] = [None] * len(passages)
        if index.embeddings is not None and passages:
            ids = [document.id for document, _ in group.documents]
            known = {} if self._force else await self._known_vectors(ids)
            missing = [i for i, h in enumerate(hashes) if h not in known]
            vectors = [known.get(h) for h in hashes]
            if not (index.mode and await index.mode.solr_embeds(self._solr)):
                texts = [passages[i].embedding_text for i in missing]
                for i, vector in zip(missing, await index.embeddings.embed(texts), strict=True):
                    vectors[i] = vector
            group.embedded = len(missing)
        embedded_by = (
            {EMBEDDING_FIELD: index.vector_field, EMBEDDING_MODEL: index.model}
            if index.embeddings and index.model
            else {}
        )
        group.commands = [("delete", _parent_query(doc.id)) for doc, _ in group.documents]
        group.commands += [
            ("add", {"doc": {**p.to_solr(index.vector_field, v), EMBEDDING_HASH: h, **embedded_by}})
            for p, v, h in zip(passages, vectors, hashes, strict=True)
        ]

    async def _write(self, group: _Group) -> None:
        """Passages first: the FileShare document carries the hash that says it is indexed,
        so a run that fails between the two writes writes both again next time."""
        if not group.documents:
            return
        if self._passages is not None:
            await self._solr.update(self._passages.collection, group.commands)
        await self._solr.add(self._collection, [fields for _, fields in group.documents])

    async def _known_vectors(self, document_ids: Sequence[str]) -> dict[str, list[float]]:
        """embedding hash -> the vector VectorMain stores, for these documents' passages."""
        index = self._passages
        assert index is not None
        found = await self._stored(
            index.collection, "parent_id", document_ids, EMBEDDING_HASH, index.vector_field
        )
        return {
            doc[EMBEDDING_HASH]: doc[index.vector_field]
            for doc in found
            if doc.get(EMBEDDING_HASH) and doc.get(index.vector_field)
        }


def with_source(document: SourceDocument, source: str) -> SourceDocument:
    """The document, saying where it came from (SOURCE_FIELD): a document replacing one of
    another source is reported (IngestSummary.replaced)."""
    fields = tuple((k, v) for k, v in document.fields if k != SOURCE_FIELD)
    return replace(document, fields=(*fields, (SOURCE_FIELD, source)))


def indexer_for(
    settings: Settings,
    solr: SolrClient,
    embeddings: EmbeddingsClient,
    *,
    force: bool = False,
    mode: EmbeddingMode | None = None,
) -> Indexer:
    """The indexer the settings describe: FileShare documents and embedded VectorMain passages
    (`force`: every document written and embedded again; `mode`: whether Solr embeds)."""
    layout, cutting = settings.solr, settings.embeddings
    return Indexer(
        solr,
        layout.documents_collection,
        passages=PassageIndex(
            collection=layout.passages_collection,
            splitter=PassageSplitter(cutting.passage_size, cutting.passage_overlap),
            vector_field=layout.vector_field,
            embeddings=embeddings,
            model=settings.embeddings.model,
            mode=mode,
        ),
        force=force,
    )


def sha256_of(*parts: str) -> str:
    """The hex sha256 of the parts, one a line: what a document or passage was made of
    (ingestion's and sync's hashes must agree for a stored vector to be reused)."""
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def _parent_query(document_id: str) -> dict[str, str]:
    # the term parser takes everything after its closing brace as the value, verbatim
    return {"query": "{!term f=parent_id}" + document_id}
