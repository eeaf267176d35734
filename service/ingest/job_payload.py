"""A job's documents, kept in the jobs collection beside the job, in pieces of PIECE documents.

The job's own document holds its state and only a note of its pieces (`{"pieces": n,
"size": PIECE}`): a job is changed by atomic updates, and Solr rewrites a document whole at
each, so a job of 100,000 documents that held them all rewrote them at every batch's
progress and every lease renewal. A worker reads a piece when its batches reach it, and the
pieces go when the job ends. A piece is a document without `state_s`: never listed, counted
or claimed as a job; its id (`<job>-payload-<k>`) is no job id (those are hex).

A job written before pieces (its documents in its own `payload`) still runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from service.ingest.extract import SourceDocument
from service.retrieval.solr import SolrClient

PIECE = 500  # documents a piece
PIECES_A_WRITE = 8  # pieces sent to Solr a request


class JobDocuments:
    """The documents of a job, read by range as its batches come."""

    total: int

    async def read(self, start: int, stop: int) -> list[SourceDocument]:
        raise NotImplementedError

    async def forget(self) -> None:
        """The job ended: what kept its documents is deleted."""


class ListedDocuments(JobDocuments):
    """Documents in memory: a folder's, read when the job runs, or a job written before
    pieces."""

    def __init__(self, documents: Sequence[SourceDocument]) -> None:
        self.documents = list(documents)
        self.total = len(self.documents)

    async def read(self, start: int, stop: int) -> list[SourceDocument]:
        return self.documents[start:stop]


class StoredDocuments(JobDocuments):
    """A job's pieces, read one at a time (the last one read is kept)."""

    def __init__(self, solr: SolrClient, collection: str, job_id: str, note: dict[str, Any],
                 total: int) -> None:  # fmt: skip
        self._solr, self._collection, self._job_id = solr, collection, job_id
        self._pieces, self._size = int(note["pieces"]), int(note["size"])
        self.total = total
        self._kept: tuple[int, list[SourceDocument]] | None = None

    async def read(self, start: int, stop: int) -> list[SourceDocument]:
        documents: list[SourceDocument] = []
        for number in range(start // self._size, (max(stop, start + 1) - 1) // self._size + 1):
            piece = await self._piece(number)
            first = number * self._size
            documents += piece[max(start - first, 0) : max(stop - first, 0)]
        return documents

    async def forget(self) -> None:
        await forget(self._solr, self._collection, self._job_id, self._pieces)

    async def _piece(self, number: int) -> list[SourceDocument]:
        if self._kept is None or self._kept[0] != number:
            found = await self._solr.get(
                self._collection, piece_id(self._job_id, number), "payload"
            )
            if found is None:
                raise LookupError(
                    f"job {self._job_id}: its documents' piece {number} is gone (the job was "
                    "cancelled, or its pieces deleted): submit it again"
                )
            self._kept = number, [decoded(item) for item in orjson.loads(found["payload"])]
        return self._kept[1]


async def write(
    solr: SolrClient, collection: str, job_id: str, documents: Sequence[SourceDocument]
) -> dict[str, int]:
    """The job's documents written in pieces (committed); the note its document keeps."""
    pieces = [
        {"id": piece_id(job_id, number),
         "payload": orjson.dumps([encoded(d) for d in documents[start : start + PIECE]]).decode()}
        for number, start in enumerate(range(0, len(documents), PIECE))
    ]  # fmt: skip
    for start in range(0, len(pieces), PIECES_A_WRITE):
        await solr.add(collection, pieces[start : start + PIECES_A_WRITE])
    await solr.commit(collection)
    return {"pieces": len(pieces), "size": PIECE}


async def forget(solr: SolrClient, collection: str, job_id: str, pieces: int) -> None:
    """The job's pieces deleted."""
    if pieces:
        ids = [piece_id(job_id, number) for number in range(pieces)]
        await solr.update(collection, [("delete", ids)], commit=True)


def piece_id(job_id: str, number: int) -> str:
    return f"{job_id}-payload-{number}"


def encoded(document: SourceDocument) -> dict[str, object]:
    return {
        "id": document.id,
        "title": document.title,
        "url": document.url,
        "content": document.content,
        "language": document.language,
        "last_modified": document.last_modified.isoformat(),
        "allowed_groups": list(document.allowed_groups),
        "denied_groups": list(document.denied_groups),
        "sections": list(document.sections),
        "fields": [list(pair) for pair in document.fields],
    }


def decoded(item: dict[str, Any]) -> SourceDocument:
    return SourceDocument(
        id=item["id"],
        title=item["title"],
        url=item["url"],
        content=item["content"],
        language=item["language"],
        last_modified=datetime.fromisoformat(item["last_modified"]),
        allowed_groups=tuple(item["allowed_groups"]),
        denied_groups=tuple(item["denied_groups"]),
        sections=tuple(item["sections"]),
        fields=tuple((str(k), str(v)) for k, v in item["fields"]),
    )
