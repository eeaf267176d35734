"""The worker side of ingestion jobs: each process of the service runs one JobRunner, which
claims a waiting job (or one whose worker died), indexes it a batch at a time and writes its
progress after each committed batch. It drives ingest/ (the jobs' store, the extraction, the
indexer) with the runtime and a snapshot of its settings, so it sits above all three, beside
the API that starts it; ingest/ imports neither.

- A batch is indexed and committed whole (service.ingest.indexer): a document is either in
  FileShare with all its passages, or not at all. A cancel takes effect after the batch in
  progress; a resumed job starts at the first batch not committed.
- A batch that fails (the embeddings API died, Solr refused a document) is tried again a
  document at a time: the documents that fail are listed with their reason, the others are
  indexed, and the job goes on.
- The lease is renewed while the job runs; a worker that dies (kill -9) stops renewing it,
  and the job is claimed again once it runs out (jobs.lease.seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from dataclasses import asdict

from service import tracing
from service.config import Settings
from service.config.tls import TlsFiles
from service.errors import BadRequest, ExtractionFailed, ServiceError
from service.ingest.extract import SourceDocument, extract_bytes
from service.ingest.folder import (
    FolderUnreadable,
    Refused,
    allowed_folder,
    document_fields,
    read_folder,
)
from service.ingest.indexer import with_source
from service.ingest.job_payload import JobDocuments, ListedDocuments
from service.ingest.jobs import MAX_ERRORS, DocumentError, FolderSync, Job, JobStore, timestamp
from service.runtime import Runtime
from service.snapshot import Snapshot

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
BACKOFF_SECONDS = 5.0


class JobRunner:
    """Runs ingestion jobs in this process, one at a time, while the service runs."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._store: tuple[Settings, TlsFiles, JobStore] | None = None

    def store(self) -> JobStore:
        """The jobs collection of the settings in force: built again only when they change
        (a reload) or Solr's TLS files do (a certificate replaced on disk), not on every poll
        (issue 70: a Snapshot and a Solr client a second cost an idle service CPU)."""
        settings = self._runtime.settings()
        tls = settings.solr.tls
        kept = self._store
        if kept is None or kept[0] is not settings or kept[1] != tls:
            snapshot = Snapshot(self._runtime, settings)
            kept = self._store = settings, tls, JobStore(snapshot.solr, snapshot.settings.jobs)
        return kept[2]

    async def run_forever(self) -> None:
        """Claims and runs jobs until cancelled (the service stops)."""
        while True:
            store = self.store()
            if not store.settings.enabled:
                await asyncio.sleep(POLL_SECONDS)
                continue
            try:
                claimed = await store.claim(self.worker)
                if claimed is None:
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                job, work = claimed
                kind = "sync" if isinstance(work, FolderSync) else "documents"
                attributes = {"solr_rag.job.id": job.id, "solr_rag.job.kind": kind}
                with tracing.span("ingestion job", attributes, root=True):  # a trace of its own
                    await self.run(store, job, work)
            except ServiceError as error:
                log.warning("ingestion jobs: %s", error.reason)
                await asyncio.sleep(BACKOFF_SECONDS)

    async def run(self, store: JobStore, job: Job, work: JobDocuments | FolderSync) -> None:
        heartbeat = asyncio.create_task(self._renew(store, job.id))
        errors = list(job.errors)
        counts = {"failed": job.failed, "passages": job.passages, "embedded": job.embedded}
        try:
            unread: list[DocumentError] = []
            if isinstance(work, FolderSync):
                try:
                    read, unread, passed_over = await self._read_folder(work)
                except (ServiceError, FolderUnreadable) as error:
                    reason = error.reason if isinstance(error, ServiceError) else str(error)
                    await store.update(job.id, state_s="failed", finished_dt=timestamp(),
                                       message_s=f"the folder was not read: {reason}")  # fmt: skip
                    log.warning("job %s: the folder was not read: %s", job.id, reason)
                    return
                if job.next == 0:  # the files' errors once, not again on a resume
                    errors += unread + passed_over
                documents: JobDocuments = ListedDocuments(read)
                await store.update(job.id, total_i=documents.total)
            else:
                documents = work
            total = documents.total
            log.info("job %s: %d documents, from document %d", job.id, total, job.next)
            if not await self._batches(store, job, documents, errors, counts):
                await documents.forget()
                return  # cancelled
            failed = counts["failed"]
            state = "failed" if total and failed == total else "done"
            notes = [f"{failed} of {total} documents failed"] if failed else []
            if isinstance(work, FolderSync) and not unread:  # an unread file is not a gone one
                present = {document.id for document in read}
                gone = await Snapshot(self._runtime).indexer.delete_gone(work.source, present)
                notes.append(f"{gone} gone deleted")
            await store.update(
                job.id, state_s=state, finished_dt=timestamp(), message_s="; ".join(notes)
            )
            await documents.forget()  # a finished job is never run again
            log.info("job %s: %s (%d failed)", job.id, state, failed)
        except asyncio.CancelledError:  # the service stops: the next start resumes it at once
            with contextlib.suppress(ServiceError):
                await asyncio.shield(store.update(job.id, lease_l=0))
            raise
        finally:
            heartbeat.cancel()

    async def _batches(
        self,
        store: JobStore,
        job: Job,
        documents: JobDocuments,
        errors: list[DocumentError],
        counts: dict[str, int],
    ) -> bool:
        """The documents from the job's next batch on, each batch committed and its progress
        written; False when the job was cancelled (after a batch) or its documents are gone."""
        size = store.settings.batch_size
        for start in range(job.next, documents.total, size):
            if await store.cancel_requested(job.id):
                await store.update(job.id, state_s="cancelled", finished_dt=timestamp())
                log.info("job %s: cancelled at document %d", job.id, start)
                return False
            try:
                batch = await documents.read(start, start + size)
            except LookupError as gone:  # its pieces deleted under it
                await store.update(job.id, state_s="failed", finished_dt=timestamp(),
                                   message_s=str(gone))  # fmt: skip
                return False
            with tracing.span("ingestion batch", {"solr_rag.batch.documents": len(batch)}):
                await self._index(batch, errors, counts)
            await store.update(
                job.id,
                done_i=start + len(batch),
                next_i=start + len(batch),
                failed_i=counts["failed"],
                passages_i=counts["passages"],
                embedded_i=counts["embedded"],
                errors_json=json.dumps([asdict(e) for e in errors[:MAX_ERRORS]]),
            )
        return True

    async def _index(
        self, batch: list[SourceDocument], errors: list[DocumentError], counts: dict[str, int]
    ) -> None:
        """One batch, committed; a failure is tried again a document at a time."""
        indexer = Snapshot(self._runtime).indexer
        try:
            summary = await indexer.run(batch)
        except ServiceError as error:
            log.warning("batch failed (%s): indexing its documents one at a time", error.reason)
        else:
            counts["passages"] += summary.passages
            counts["embedded"] += summary.embedded
            return
        for document in batch:
            try:
                summary = await indexer.run([document])
            except ServiceError as error:
                counts["failed"] += 1
                errors.append(DocumentError(document.id, error.reason))
                continue
            counts["passages"] += summary.passages
            counts["embedded"] += summary.embedded

    async def _read_folder(
        self, work: FolderSync
    ) -> tuple[list[SourceDocument], list[DocumentError], list[DocumentError]]:
        """The folder's own files as documents (read without leaving the folder: see
        service.ingest.folder; extracted in the worker process, as uploads are), and those
        that could not be read, and those passed over by rule."""
        settings = self._runtime.settings().jobs
        folder = allowed_folder(work.folder, settings.sync_folders)  # still allowed now
        if str(folder) != work.folder:
            raise BadRequest("the folder changed since the job was asked for (now a link)")
        documents: list[SourceDocument] = []
        unread: list[DocumentError] = []  # may still be there: nothing is deleted
        passed_over: list[DocumentError] = []  # refused by rule (links, FIFOs...): no file
        files = read_folder(folder)
        while (item := await asyncio.to_thread(next, files, None)) is not None:
            if isinstance(item, Refused):
                (unread if item.unreadable else passed_over).append(
                    DocumentError(item.relative, item.reason)
                )
                continue
            fields = document_fields(item, folder, work.source, work.language)
            try:
                document = await self._runtime.extractor.run(
                    extract_bytes, item.relative, item.data, **fields
                )
            except ExtractionFailed as error:
                unread.append(DocumentError(item.relative, str(error)))
                continue
            documents.append(with_source(document, work.source))
        return documents, unread, passed_over

    async def _renew(self, store: JobStore, job_id: str) -> None:
        """The lease renewed a few times per jobs.lease.seconds, while the job runs."""
        while True:
            await asyncio.sleep(store.settings.lease_seconds / 3)
            try:
                await store.renew(job_id, self.worker)
            except ServiceError as error:
                log.warning("job %s: lease not renewed (%s)", job_id, error.reason)
