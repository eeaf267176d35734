"""`solr-rag sync`: the passages collection follows the documents collection, whoever writes it.

For a Solr where no plugin may be installed: a crawler (ManifoldCF, a script) fills the
documents collection, and sync makes the passages (split and embedded as ingestion does) of
the documents that are new or changed since, and removes those whose document is gone.

- The documents are read a page at a time in id order (cursorMark), their fields through
  solr.documents.fields; the passages are written through solr.passages.fields, each with the
  hash of what it was made from (SYNC_HASH): a document whose passages carry its current hash
  is unchanged and costs nothing. A changed one is split again, and a passage whose text and
  model are as before keeps its stored vector (EMBEDDING_HASH): only new text is embedded.
- Each page is committed, then the checkpoint (the page's cursorMark) is written: a run that
  stops (a crash, Ctrl-C) resumes after the last committed page.
- Then the passages are read in parent order, and those whose parent the documents
  collection no longer holds are deleted.
- Security fields (ours and ManifoldCF's) are copied from a document to its passages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.config import Settings
from service.config.field_map import SchemaFields
from service.errors import SolrLayoutError
from service.ingest.extract import MAX_DOCUMENT_CHARS
from service.ingest.indexer import EMBEDDING_HASH, ID_SEPARATOR, IngestProgress, sha256_of
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.layout import ANALYSIS_VERSION, EMBEDDING_FIELD, EMBEDDING_MODEL
from service.retrieval.reading import documents_from_response, read_params
from service.retrieval.scope import INDEX_FIELD, MAIN_CORPUS, security_fields
from service.retrieval.solr import SolrClient
from service.text.chunk import Chunker

log = logging.getLogger(__name__)

SYNC_HASH = "sync_hash_s"  # a passage: the hash of the document version it was made from
PAGE = 100  # documents read, and passages' parents checked, a request
SLICE = 256  # passages embedded, written and committed together
SECURITY = (*security_fields("groups"), *security_fields("manifoldcf"))


@dataclass(frozen=True)
class SyncSummary:
    """What a sync did."""

    documents: int  # read
    changed: int  # whose passages were written again
    passages: int  # written
    embedded: int  # of them, embedded (the others kept their vectors)
    removed: int  # documents gone, whose passages were deleted
    seconds: float
    resumed: bool = False

    def __str__(self) -> str:
        rate = self.documents / self.seconds if self.seconds else 0.0
        again = " (resumed)" if self.resumed else ""
        return (
            f"{self.documents} documents read{again}, {self.changed} new or changed: "
            f"{self.passages} passages written ({self.embedded} embedded); passages of "
            f"{self.removed} documents gone removed; {self.seconds:.1f}s "
            f"({rate:.1f} documents/s)"
        )


@dataclass(frozen=True)
class Checkpoint:
    """Where a sync is: the cursorMark after the last committed page, and what it had done."""

    path: Path
    fingerprint: str

    def load(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("fingerprint") != self.fingerprint:
            return None  # another configuration's: started again
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Written whole or not at all (a temporary file renamed over the old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({**state, "fingerprint": self.fingerprint}), "utf-8")
        os.replace(temporary, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


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
    ) -> None:
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
        self._page = page
        self._chunk_index = False  # whether passages have Datafari's (and our) chunk_index
        made_of = [
            *(self._documents, self._passages, str(self._in.roles), str(self._out.roles)),
            *(self._model, str(cutting.passage_size), str(cutting.passage_overlap)),
            ANALYSIS_VERSION,  # Solr's analysis of a passage changed: written again
        ]
        self._made_of = sha256_of(*made_of)  # what every passage depends on, besides its document
        self.checkpoint = Checkpoint(checkpoint, self._made_of)

    async def run(self, progress: Callable[[IngestProgress], None] | None = None) -> SyncSummary:
        started = time.perf_counter()
        source = await self._solr.schema_fields(self._documents)
        target = await self._solr.schema_fields(self._passages)
        self._check(target)
        self._chunk_index = target.has("chunk_index")
        copied = [f for f in SECURITY if source.has(f) and target.has(f)]
        state = self.checkpoint.load()
        resumed = state is not None
        state = state or {"cursor": "*", "read": 0, "changed": 0, "passages": 0, "embedded": 0}
        corpus = [MAIN_CORPUS] if source.has(INDEX_FIELD) else []
        id_field = self._in.field("id")
        reading = read_params(self._in, source, MAX_DOCUMENT_CHARS, score=False)
        reading["fl"] = ",".join([reading["fl"], *copied])
        while True:
            found = await self._solr.select(
                self._documents,
                {"q": "*:*", "defType": "lucene", "fq": corpus, "sort": f"{id_field} asc",
                 "rows": self._page, "cursorMark": state["cursor"], **reading},
            )  # fmt: skip
            total = int(found["response"]["numFound"])

            def said(passages: int, embedded: int, total: int = total) -> None:
                """Progress within the page too: a large document's passages take long."""
                if progress:
                    seconds = time.perf_counter() - started
                    done = state["passages"] + passages, state["embedded"] + embedded
                    progress(IngestProgress(state["read"], total, *done, seconds))

            docs = found["response"]["docs"]
            read = documents_from_response(found, self._in, max_chars=MAX_DOCUMENT_CHARS)
            texts = [document.content for document in read]
            written, embedded, changed = await self._write(docs, texts, copied, said)
            await self._solr.commit(self._passages)
            state["read"] += len(docs)
            state["changed"] += changed
            state["passages"] += written
            state["embedded"] += embedded
            cursor = found.get("nextCursorMark", state["cursor"])
            done = cursor == state["cursor"] or len(docs) < self._page
            state["cursor"] = cursor
            self.checkpoint.save(state)
            said(0, 0)
            if done:
                break
        removed = await self._remove_orphans()
        await self._solr.commit(self._passages)
        self.checkpoint.clear()
        seconds = time.perf_counter() - started
        return SyncSummary(state["read"], state["changed"], state["passages"], state["embedded"],
                           removed, seconds, resumed)  # fmt: skip

    def _check(self, target: SchemaFields) -> None:
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
    ) -> tuple[int, int, int]:
        """The passages of this page's new and changed documents: (written, embedded,
        documents changed). `texts`: each document's text, read up to MAX_DOCUMENT_CHARS."""
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
            i: v
            for i, v in versions.items()
            if held.get(i, (None, {}))[0] != v[0] and (i in held or v[2].strip())
        }  # a document without text and without passages has nothing to change
        if not changed:
            return 0, 0, 0
        known = {h: vec for _, vectors in (held.get(i, (None, {})) for i in changed)
                 for h, vec in vectors.items()}  # fmt: skip
        fields = (self._out.field("parent"), self._vector)
        writer = _SliceWriter(self._solr, self._passages, self._embeddings, fields, known, said)
        for parent, (version, title, text, url, language, meta) in changed.items():
            pieces = await asyncio.to_thread(self._chunker.run, text)
            writer.delete(parent)
            # the first passage last: a document whose run stopped midway lacks it, and is
            # made again (its passages' stored vectors reused) by the next run
            prefix = self._embeddings.prefixes["passage"]  # e5's "passage: " (reused: same)
            for index in [*range(1, len(pieces)), *range(min(1, len(pieces)))]:
                embedded_text = f"{title}\n{pieces[index]}" if title else pieces[index]
                passage: dict[str, Any] = {
                    self._out.field("id"): f"{parent}_{index}",
                    self._out.field("parent"): parent,
                    self._text_field: pieces[index],
                    **({"chunk_index": index} if self._chunk_index else {}),
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
        return writer.written, writer.embedded, len(changed)

    async def _held(self, parents: Sequence[str]) -> dict[str, tuple[str | None, dict]]:
        """parent -> (the version its passages were made from, their vectors by hash)."""
        parents = [p for p in parents if p and ID_SEPARATOR not in p]
        if not parents:
            return {}
        parent = self._out.field("parent")
        id_field = self._out.field("id")
        found = await self._solr.select(
            self._passages,
            {
                "q": _terms(parent, parents),
                "defType": "lucene",
                "rows": 100_000,
                "fl": ",".join([id_field, parent, SYNC_HASH, EMBEDDING_HASH, self._vector]),
            },
        )
        held: dict[str, tuple[str | None, dict]] = {}
        first: set[str] = set()  # the parents whose first passage is there: written whole
        for doc in found["response"]["docs"]:
            version, vectors = held.get(doc[parent], (doc.get(SYNC_HASH), {}))
            if doc.get(SYNC_HASH) != version:
                version = None  # passages of two versions: made again
            if doc.get(EMBEDDING_HASH) and doc.get(self._vector):
                vectors[doc[EMBEDDING_HASH]] = doc[self._vector]
            held[doc[parent]] = (version, vectors)
            if str(doc.get(id_field)) == f"{doc[parent]}_0":
                first.add(doc[parent])
        return {p: (v if p in first else None, vectors) for p, (v, vectors) in held.items()}

    async def _remove_orphans(self) -> int:
        """Deletes the passages whose parent the documents collection no longer holds: how
        many parents were gone."""
        parent = self._out.field("parent")
        cursor, removed = "*", 0
        while True:
            found = await self._solr.select(
                self._passages,
                {"q": "*:*", "defType": "lucene", "rows": self._page * 10, "fl": parent,
                 "sort": f"{parent} asc, {self._out.field('id')} asc", "cursorMark": cursor},
            )  # fmt: skip
            parents = list(
                dict.fromkeys(d[parent] for d in found["response"]["docs"] if parent in d)
            )
            gone = set(parents) - await self._existing(parents)
            if gone:
                await self._solr.update(
                    self._passages,
                    [("delete", {"query": f"{{!term f={parent}}}{p}"}) for p in gone],
                )
                removed += len(gone)
            next_cursor = found.get("nextCursorMark", cursor)
            if next_cursor == cursor or not found["response"]["docs"]:
                return removed
            cursor = next_cursor

    async def _existing(self, ids: Sequence[str]) -> set[str]:
        id_field = self._in.field("id")
        existing: set[str] = set()
        for start in range(0, len(ids), self._page):
            batch = [i for i in ids[start : start + self._page] if ID_SEPARATOR not in i]
            if not batch:
                continue
            found = await self._solr.select(
                self._documents,
                {"q": _terms(id_field, batch), "defType": "lucene", "rows": len(batch),
                 "fl": id_field},
            )  # fmt: skip
            existing |= {str(doc[id_field]) for doc in found["response"]["docs"]}
        return existing


class _SliceWriter:
    """A page's passages written SLICE at a time, each slice embedded (but for the vectors
    Solr already holds), written and committed, and its progress said: a document of
    thousands of passages shows its progress, and a run that stops midway keeps what it
    wrote (the next one reuses those vectors)."""

    def __init__(
        self,
        solr: SolrClient,
        collection: str,
        embeddings: EmbeddingsClient,
        fields: tuple[str, str],
        known: dict[str, list[float]],
        said: Callable[[int, int], None],
    ) -> None:
        self._solr, self._collection, self._embeddings = solr, collection, embeddings
        self._parent, self._vector = fields  # the passages' parent and vector fields
        self._known = known
        self._said = said
        self._commands: list[tuple[str, object]] = []
        self._passages: list[tuple[dict[str, Any], str]] = []
        self.written = 0
        self.embedded = 0

    def delete(self, parent: str) -> None:
        self._commands.append(("delete", {"query": f"{{!term f={self._parent}}}{parent}"}))

    async def add(self, passage: dict[str, Any], embedded_text: str) -> None:
        self._passages.append((passage, embedded_text))
        if len(self._passages) >= SLICE:
            await self.flush(commit=True)

    async def flush(self, *, commit: bool = False) -> None:
        missing = [
            i for i, (p, _) in enumerate(self._passages) if p[EMBEDDING_HASH] not in self._known
        ]
        texts = [self._passages[i][1] for i in missing]
        vectors = await self._embeddings.embed(texts) if texts else []
        fresh = dict(zip(missing, vectors, strict=True))
        for i, (passage, _) in enumerate(self._passages):
            passage[self._vector] = fresh.get(i) or self._known[passage[EMBEDDING_HASH]]
        commands = self._commands + [("add", {"doc": p}) for p, _ in self._passages]
        if commands:
            await self._solr.update(self._collection, commands, commit=commit)
        self.written += len(self._passages)
        self.embedded += len(missing)
        self._commands, self._passages = [], []
        if commit:  # a slice within the page (the page's end is said once it is committed)
            self._said(self.written, self.embedded)


def default_checkpoint(settings: Settings) -> Path:
    """~/.cache/solr-rag/sync-<documents>-<passages>.json"""
    layout = settings.solr
    name = f"sync-{layout.documents_collection}-{layout.passages_collection}.json"
    return Path.home() / ".cache" / "solr-rag" / name


def _terms(field: str, values: Sequence[str]) -> str:
    """A query for the documents whose `field` is one of `values` (none holds the separator;
    quoted: Java counts it as white space)."""
    return f"{{!terms f={field} separator='{ID_SEPARATOR}'}}" + ID_SEPARATOR.join(values)
