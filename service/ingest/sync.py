"""`solr-rag sync`: the passages collection follows the documents collection, whoever writes it.

For a Solr where no plugin may be installed: a crawler (ManifoldCF, a script) fills the
documents collection, and sync makes the passages (split and embedded as ingestion does) of
the documents that are new or changed since, and removes those whose document is gone. A run
costs what changed, not what the collection holds:

- Only the documents written since the last run are read (their `_version_` above its mark:
  service.ingest.sync_state), a page at a time in `_version_` order (cursorMark), their
  fields through solr.documents.fields; a first run (or --restart) reads them all.
- The passages are written through solr.passages.fields, each with the hash of what it was
  made from (SYNC_HASH): a document read again whose passages carry its current hash (a
  crawler that wrote it again unchanged) costs its hashes, never its vectors. A changed one is
  split again, and a passage whose text and model are as before keeps its stored vector
  (EMBEDDING_HASH): only new text is embedded.
- Each page is committed, then the checkpoint (the page's cursorMark) is written: a run that
  stops (a crash, Ctrl-C) resumes after the last committed page. One run at a time holds it.
- A passages collection that holds fewer first passages than the last run left (emptied,
  recreated, passages deleted by hand) has every document read again.
- Then the passages whose document is gone are deleted: counted in a few requests, the ids
  compared only when the counts are not exactly those of none gone (service.ingest.orphans);
  a document the comparison finds without passages, not known to be without text, is read
  again.
- Security fields (ours and ManifoldCF's) are copied from a document to its passages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.config import Settings
from service.config.field_map import SchemaFields
from service.errors import SolrLayoutError
from service.ingest.extract import MAX_DOCUMENT_CHARS
from service.ingest.indexer import EMBEDDING_HASH, ID_SEPARATOR, IngestProgress, sha256_of
from service.ingest.orphans import FIRST, Orphans, corpus_side
from service.ingest.sync_slices import SLICE as SLICE  # the tests read it here
from service.ingest.sync_slices import SliceWriter
from service.ingest.sync_state import SETTLE_SECONDS, Checkpoint, SyncState, lowest_newest
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.layout import ANALYSIS_VERSION, EMBEDDING_FIELD, EMBEDDING_MODEL
from service.retrieval.pages import pages
from service.retrieval.reading import documents_from_response, read_params
from service.retrieval.scope import INDEX_FIELD, MAIN_CORPUS, security_fields
from service.retrieval.solr import SolrClient
from service.text.chunk import Chunker

log = logging.getLogger(__name__)

SYNC_HASH = "sync_hash_s"  # a passage: the hash of the document version it was made from
PAGE = 100  # documents read a request
HELD_PAGE = 10_000  # passages' hashes read a request
VECTOR_PAGE = 1_000  # passages' vectors read a request
SECURITY = (*security_fields("groups"), *security_fields("manifoldcf"))


@dataclass(frozen=True)
class SyncSummary:
    """What a sync did."""

    documents: int  # read (those written since the last run)
    changed: int  # whose passages were written again
    passages: int  # written
    embedded: int  # of them, embedded (the others kept their vectors)
    removed: int  # documents gone, whose passages were deleted
    seconds: float
    resumed: bool = False
    compared: int = 0  # ids compared to find the gone (0: the counts showed none was)

    def __str__(self) -> str:
        rate = self.documents / self.seconds if self.seconds else 0.0
        again = " (resumed)" if self.resumed else ""
        gone = f"{self.compared} ids compared" if self.compared else "counted"
        return (
            f"{self.documents} documents read{again}, {self.changed} new or changed: "
            f"{self.passages} passages written ({self.embedded} embedded); passages of "
            f"{self.removed} documents gone removed ({gone}); {self.seconds:.1f}s "
            f"({rate:.1f} documents/s)"
        )


@dataclass(frozen=True)
class PageWritten:
    """What one page of documents came to."""

    written: int  # passages
    embedded: int
    changed: int  # documents
    textless: frozenset[str]  # the page's documents left without passages
    with_passages: frozenset[str]  # and those with

    @property
    def read(self) -> int:
        return len(self.textless) + len(self.with_passages)


class PassageSync:
    """Brings the passages collection in line with the documents collection."""

    def __init__(
        self,
        solr: SolrClient,
        settings: Settings,
        embeddings: EmbeddingsClient,
        *,
        checkpoint: Path,
        page: int = PAGE,
        settle: float = SETTLE_SECONDS,
    ) -> None:
        """`settle`: seconds a write to the documents collection may take to become visible
        (autoSoftCommit, commitWithin, several shards): what changed this long before a run
        is read again by the next."""
        layout = settings.solr
        self._solr = solr
        self._documents, self._passages = layout.documents_collection, layout.passages_collection
        self._in, self._out = layout.documents_map, layout.passages_map
        self._vector = self._out.field("vector")
        self._text_field = self._out.written("text") or "content"
        self._embeddings = embeddings
        self._model = settings.embeddings.model
        cutting = settings.embeddings
        self._chunker = Chunker(cutting.passage_size, cutting.passage_overlap)
        self._page_size = page
        self._settle = settle
        self._chunk_index = False  # whether passages have Datafari's (and our) chunk_index
        made_of = [
            str(layout.url),  # another Solr's collections of the same names: started again
            *(self._documents, self._passages, str(self._in.roles), str(self._out.roles)),
            *(self._model, str(cutting.passage_size), str(cutting.passage_overlap)),
            ANALYSIS_VERSION,  # Solr's analysis of a passage changed: written again
        ]
        self._made_of = sha256_of(*made_of)  # what every passage depends on, besides its document
        self.checkpoint = Checkpoint(checkpoint, self._made_of)

    async def run(self, progress: Callable[[IngestProgress], None] | None = None) -> SyncSummary:
        """One run, holding the checkpoint (SyncRunning: another run holds it)."""
        with self.checkpoint.held():
            return await self._run(progress)

    async def _run(self, progress: Callable[[IngestProgress], None] | None) -> SyncSummary:
        started = time.perf_counter()
        source = await self._solr.schema_fields(self._documents)
        target = await self._solr.schema_fields(self._passages)
        self._check(source, target)
        self._chunk_index = target.has(FIRST)
        orphans = self._orphans(source, target)
        copied = [f for f in SECURITY if source.has(f) and target.has(f)]
        corpus = [MAIN_CORPUS] if source.has(INDEX_FIELD) else []
        firsts = await orphans.firsts()
        kept = self._kept(firsts) or SyncState()
        resumed = kept.running
        state = kept if resumed else kept.begun(await self._newest(corpus), self._settle)
        textless = set(self.checkpoint.load_textless(kept))
        reading = read_params(self._in, source, MAX_DOCUMENT_CHARS, score=False)
        reading["fl"] = ",".join([reading["fl"], *copied])
        told = _Progress(progress, started, state)
        async for found, cursor in self._changed_pages(state, corpus, reading):
            told.total = int(found["response"]["numFound"])
            page = await self._page(found, copied, told.said)
            textless = (textless - page.with_passages) | page.textless
            state = state.advanced(cursor, page.read, page.changed, page.written, page.embedded)
            self.checkpoint.save(state)
            told.state = state
            told.said(0, 0)
        report = await orphans.run(
            state.settled, frozenset(textless), compare=state.since is None or resumed
        )
        if report.unpassaged is not None:  # walked: those not known to be without text, read
            unread = report.unpassaged - textless
            textless = (textless & report.unpassaged) | {i for i in unread if ID_SEPARATOR in i}
            async for page in self._again(unread, corpus, reading, copied, told.said):
                textless |= page.textless
                state = state.advanced(state.cursor, page.read, page.changed, page.written,
                                       page.embedded)  # fmt: skip
        await self._solr.commit(self._passages)
        if state.changed or report.removed:
            firsts = await orphans.firsts()
        ended = state.ended(firsts)
        self.checkpoint.save_textless(ended, textless)
        self.checkpoint.save(ended)
        seconds = time.perf_counter() - started
        return SyncSummary(state.read, state.changed, state.passages, state.embedded,
                           report.removed, seconds, resumed, report.compared)  # fmt: skip

    def _kept(self, firsts: int) -> SyncState | None:
        """The checkpoint's state, unless the passages collection lost first passages since
        (`firsts`: held now): emptied or recreated, or passages deleted but by a sync. A run
        that resumes is forgiven a few (its own rewrites midway); it compares the ids."""
        kept = self.checkpoint.load()
        if kept is None or kept.firsts is None or firsts >= kept.firsts:
            return kept
        if kept.running and firsts:
            return kept
        log.warning(
            "%s holds %d first passages, %d when the last sync ended (emptied, made again, or "
            "passages deleted): every document of %s is read again",
            self._passages, firsts, kept.firsts, self._documents,
        )  # fmt: skip
        return None

    async def _page(
        self, found: dict[str, Any], copied: list[str], said: Callable[[int, int], None]
    ) -> PageWritten:
        """A page of documents read: their passages written (and committed if any was)."""
        docs = found["response"]["docs"]
        read = documents_from_response(found, self._in, max_chars=MAX_DOCUMENT_CHARS)
        page = await self._write(docs, [document.content for document in read], copied, said)
        if page.changed:  # a page of documents written again unchanged opens no searcher
            await self._solr.commit(self._passages)
        return page

    async def _again(
        self,
        ids: frozenset[str],
        corpus: list[str],
        reading: dict[str, str],
        copied: list[str],
        said: Callable[[int, int], None],
    ) -> AsyncIterator[PageWritten]:
        """These documents read again (those the ids' comparison found without passages, not
        known to be without text), a page at a time."""
        wanted = sorted(i for i in ids if ID_SEPARATOR not in i)  # one holding it: not asked
        id_field = self._in.field("id")
        for start in range(0, len(wanted), self._page_size):
            batch = wanted[start : start + self._page_size]
            params = {"q": "*:*", "defType": "lucene", "fq": [*corpus, _terms(id_field, batch)],
                      "sort": f"{id_field} asc", "rows": len(batch), **reading}  # fmt: skip
            found = await self._solr.select(self._documents, params)
            if found["response"]["docs"]:
                yield await self._page(found, copied, said)

    async def _newest(self, corpus: list[str]) -> int | None:
        """The lowest of the shards' newest `_version_` (None: the documents collection is
        empty): each shard's leader stamps its writes by its own clock. One request for one
        shard, one more a shard for several."""
        newest = {"q": "*:*", "defType": "lucene", "fq": corpus, "rows": 0,
                  "json.facet": json.dumps({"newest": "max(_version_)"})}  # fmt: skip
        found = await self._solr.select(self._documents, {**newest, "shards.info": "true"})
        shards = list(found.get("shards.info") or {})  # each a shard's replicas' addresses
        if len(shards) <= 1:
            return _newest_of(found)
        each = [
            _newest_of(await self._solr.select(self._documents, {**newest, "shards": shard}))
            for shard in shards
        ]
        return lowest_newest(each)

    async def _changed_pages(
        self, state: SyncState, corpus: list[str], reading: dict[str, str]
    ) -> AsyncIterator[tuple[dict[str, Any], str]]:
        """The pages of documents written since the last run's mark (every document on a
        first run), in `_version_` order, each with the cursorMark after it; from the
        state's cursorMark (a run that resumes)."""
        id_field = self._in.field("id")
        since = [] if state.since is None else [f"_version_:{{{state.since} TO *]"]
        params = {
            "q": "*:*",
            "defType": "lucene",
            "fq": [*corpus, *since],
            "sort": f"_version_ asc, {id_field} asc",
            "rows": self._page_size,
            **reading,
        }
        async for found, cursor in pages(self._solr, self._documents, params, cursor=state.cursor):
            if found["response"]["docs"]:
                yield found, cursor

    def _orphans(self, source: SchemaFields, target: SchemaFields) -> Orphans:
        documents = corpus_side(self._documents, self._in.field("id"), self._in.field("id"),
                                source.has(INDEX_FIELD), MAIN_CORPUS)  # fmt: skip
        passages = corpus_side(self._passages, self._out.field("parent"), self._out.field("id"),
                               target.has(INDEX_FIELD), MAIN_CORPUS)  # fmt: skip
        return Orphans(self._solr, documents, passages, first=self._chunk_index)

    def _check(self, source: SchemaFields, target: SchemaFields) -> None:
        if not source.has("_version_"):
            raise SolrLayoutError(
                f"{self._documents} (solr.collection.documents) has no _version_ field: sync "
                "reads the documents written since its last run by it. Add "
                '<field name="_version_" type="plong" indexed="false" stored="false" '
                'docValues="true"/> to its schema (Solr\'s update log needs it too)'
            )
        text = self._out.written("text")
        needed = [SYNC_HASH, EMBEDDING_HASH, self._out.field("parent"), self._vector,
                  *([text] if text else [])]  # fmt: skip
        missing = [name for name in needed if not target.has(name)]
        if missing:
            raise SolrLayoutError(
                f"{self._passages} (solr.collection.passages) has no field {', '.join(missing)}"
                ": sync writes each passage's text, parent and vector where "
                "solr.passages.fields says, and its hashes in string fields (a *_s dynamic "
                "field, as in solr/configsets/VectorMain)"
            )

    async def _write(
        self,
        docs: list[dict[str, Any]],
        texts: list[str],
        copied: list[str],
        said: Callable[[int, int], None],
    ) -> PageWritten:
        """The passages of this page's new and changed documents. `texts`: each document's
        text, read up to MAX_DOCUMENT_CHARS."""
        read = self._in.read
        versions = {}
        for doc, text in zip(docs, texts, strict=True):
            title = read(doc, "title")
            meta = {name: doc[name] for name in copied if name in doc}
            url, language = read(doc, "url"), read(doc, "language")
            version = sha256_of(
                self._made_of, title, text, url, language, json.dumps(meta, sort_keys=True)
            )
            versions[read(doc, "id")] = (version, title, text, url, language, meta)
        held = await self._held(list(versions))
        changed = {
            i: v for i, v in versions.items() if held.get(i) != v[0] and (i in held or v[2].strip())
        }  # a document without text and without passages has nothing to change
        unchanged = {i for i in versions if i not in changed}
        with_passages = {i for i in unchanged if i in held}
        if not changed:
            return PageWritten(0, 0, 0, frozenset(unchanged - with_passages),
                               frozenset(with_passages))  # fmt: skip
        known = await self._vectors([i for i in changed if i in held])
        fields = (self._out.field("parent"), self._vector)
        writer = SliceWriter(self._solr, self._passages, self._embeddings, fields, known, said)
        textless = unchanged - with_passages
        for parent, (version, title, text, url, language, meta) in changed.items():
            pieces = await asyncio.to_thread(self._chunker.run, text)
            writer.delete(parent)
            (with_passages if pieces else textless).add(parent)
            # the first passage last: a document whose run stopped midway lacks it, and is
            # made again (its passages' stored vectors reused) by the next run
            prefix = self._embeddings.prefixes["passage"]  # e5's "passage: " (reused: same)
            for index in [*range(1, len(pieces)), *range(min(1, len(pieces)))]:
                embedded_text = f"{title}\n{pieces[index]}" if title else pieces[index]
                passage: dict[str, Any] = {
                    self._out.field("id"): f"{parent}_{index}",
                    self._out.field("parent"): parent,
                    self._text_field: pieces[index],
                    **({FIRST: index} if self._chunk_index else {}),
                    SYNC_HASH: version,
                    EMBEDDING_HASH: sha256_of(self._model, self._vector, prefix + embedded_text),
                    EMBEDDING_FIELD: self._vector,
                    EMBEDDING_MODEL: self._model,
                    **meta,
                }
                for role, value in (("title", title), ("url", url), ("language", language)):
                    if value and (field := self._out.written(role)):
                        passage[field] = value
                await writer.add(passage, embedded_text)
        await writer.flush()
        return PageWritten(writer.written, writer.embedded, len(changed), frozenset(textless),
                           frozenset(with_passages))  # fmt: skip

    async def _held(self, parents: Sequence[str]) -> dict[str, str | None]:
        """parent -> the version its passages were made from (None: they are of two versions,
        or the first is missing: a run stopped midway), for the parents that have passages.
        Their hashes only: the vectors are read for the changed documents alone."""
        parent, id_field = self._out.field("parent"), self._out.field("id")
        held: dict[str, str | None] = {}
        first: set[str] = set()  # the parents whose first passage is there: written whole
        async for doc in self._passages_of(parents, [id_field, parent, SYNC_HASH], HELD_PAGE):
            version = doc.get(SYNC_HASH)
            if doc[parent] in held and held[doc[parent]] != version:
                version = None  # passages of two versions: made again
            held[doc[parent]] = version
            if str(doc.get(id_field)) == f"{doc[parent]}_0":
                first.add(doc[parent])
        return {p: (v if p in first else None) for p, v in held.items()}

    async def _vectors(self, parents: Sequence[str]) -> dict[str, list[float]]:
        """embedding hash -> the vector stored, for these parents' passages."""
        vectors: dict[str, list[float]] = {}
        fields = [self._out.field("id"), EMBEDDING_HASH, self._vector]
        async for doc in self._passages_of(parents, fields, VECTOR_PAGE):
            if doc.get(EMBEDDING_HASH) and doc.get(self._vector):
                vectors[doc[EMBEDDING_HASH]] = doc[self._vector]
        return vectors

    async def _passages_of(
        self, parents: Sequence[str], fields: list[str], rows: int
    ) -> AsyncIterator[dict[str, Any]]:
        """These parents' passages (only `fields`), `rows` a request, however many."""
        parents = [p for p in parents if p and ID_SEPARATOR not in p]
        if not parents:
            return
        params = {
            "q": _terms(self._out.field("parent"), parents),
            "defType": "lucene",
            "fl": ",".join(fields),
            "sort": f"{self._out.field('id')} asc",
            "rows": rows,
        }
        async for found, _ in pages(self._solr, self._passages, params):
            for doc in found["response"]["docs"]:
                yield doc


class _Progress:
    """What a run says of its progress: after each page, and within one (a large document's
    passages take long)."""

    def __init__(
        self, progress: Callable[[IngestProgress], None] | None, started: float, state: SyncState
    ) -> None:
        self._progress, self._started = progress, started
        self.state = state  # as of the last committed page
        self.total = 0  # documents to read, as the last page said

    def said(self, passages: int, embedded: int) -> None:
        """`passages` written and `embedded` within the page so far."""
        if self._progress:
            state, seconds = self.state, time.perf_counter() - self._started
            done = state.passages + passages, state.embedded + embedded
            self._progress(IngestProgress(state.read, self.total, *done, seconds))


def default_checkpoint(settings: Settings) -> Path:
    """~/.cache/solr-rag/sync-<documents>-<passages>.json"""
    layout = settings.solr
    name = f"sync-{layout.documents_collection}-{layout.passages_collection}.json"
    return Path.home() / ".cache" / "solr-rag" / name


def _newest_of(found: dict[str, Any]) -> int | None:
    newest = found.get("facets", {}).get("newest")
    return int(newest) if newest is not None and int(found["response"]["numFound"]) else None


def _terms(field: str, values: Sequence[str]) -> str:
    """A query for the documents whose `field` is one of `values` (none holds the separator;
    quoted: Java counts it as white space)."""
    return f"{{!terms f={field} separator='{ID_SEPARATOR}'}}" + ID_SEPARATOR.join(values)
