"""Ingestion jobs, kept in Solr (jobs.collection) so that every worker and a restarted service
see them: submitted, claimed by one worker, their progress written after each batch.

    >>> store = JobStore(solr, settings.jobs)
    >>> job_id = await store.submit(caller, documents)     # queued
    >>> await store.get(job_id)                            # Job: state, counts, errors

A job is one Solr document, changed by atomic updates (a progress update never overwrites a
cancel); its documents are kept beside it in pieces (service.ingest.job_payload), so that an
update rewrites its state, not its documents. A worker claims a job with optimistic
concurrency (`_version_`), so two never run it, and holds it by a lease it renews: a job whose
lease ran out (its worker died) is claimed again and resumed at its first batch not committed
(`next_i`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import orjson

from service.config.settings import JobsSettings
from service.errors import (
    FeatureDisabled,
    JobNotFound,
    ServiceError,
    TooManyJobs,
    UpstreamBadResponse,
)
from service.ingest import job_payload
from service.ingest.extract import SourceDocument
from service.ingest.job_payload import JobDocuments, ListedDocuments, StoredDocuments
from service.retrieval.solr import SolrClient

T = TypeVar("T")
State = Literal["queued", "running", "done", "failed", "cancelled"]
ACTIVE = "state_s:(queued OR running)"
FINISHED = frozenset({"done", "failed", "cancelled"})
MAX_ERRORS = 100  # per-document errors kept with a job (the count is exact)
RETRY_AFTER_SECONDS = 30
ADMISSION_LOCK = "admission-lock"  # a document of the jobs collection, not a job
ADMISSION_LEASE_MS = 10_000  # a holder that died leaves the lock for this long
ADMISSION_WAIT_SECONDS = 15.0  # a submission waits this long for the lock, then a 429
LISTED_FIELDS = (
    "id,state_s,kind_s,caller_s,created_dt,started_dt,finished_dt,total_i,done_i,failed_i,"
    "passages_i,embedded_i,next_i,worker_s,lease_l,cancel_b,message_s,errors_json"
)


@dataclass(frozen=True)
class FolderSync:
    """A folder of the server to bring the index in step with (POST /jobs/sync): its files
    are read when the job runs."""

    folder: str
    source: str
    language: str = ""  # empty: detected by Solr


@dataclass(frozen=True)
class DocumentError:
    """A document the job could not index, and why."""

    id: str
    reason: str


@dataclass(frozen=True)
class Job:
    """An ingestion job as its Solr document says it is now."""

    id: str
    state: State
    kind: str
    caller: str
    created: str
    total: int
    done: int = 0  # documents of the input behind the job (indexed, unchanged or failed)
    failed: int = 0
    passages: int = 0
    embedded: int = 0
    next: int = 0  # the first document of the next batch
    started: str | None = None
    finished: str | None = None
    worker: str = ""
    lease: int = 0  # epoch ms until which `worker` holds it
    cancel_requested: bool = False
    message: str = ""
    errors: list[DocumentError] = field(default_factory=list)
    version: int = 0

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Job:
        errors = json.loads(doc.get("errors_json") or "[]")
        return cls(
            id=doc["id"],
            state=doc.get("state_s", "queued"),
            kind=doc.get("kind_s", "documents"),
            caller=doc.get("caller_s", ""),
            created=doc.get("created_dt", ""),
            total=int(doc.get("total_i", 0)),
            done=int(doc.get("done_i", 0)),
            failed=int(doc.get("failed_i", 0)),
            passages=int(doc.get("passages_i", 0)),
            embedded=int(doc.get("embedded_i", 0)),
            next=int(doc.get("next_i", 0)),
            started=doc.get("started_dt"),
            finished=doc.get("finished_dt"),
            worker=doc.get("worker_s", ""),
            lease=int(doc.get("lease_l", 0)),
            cancel_requested=bool(doc.get("cancel_b", False)),
            message=doc.get("message_s", ""),
            errors=[DocumentError(e["id"], e["reason"]) for e in errors],
            version=int(doc.get("_version_", 0)),
        )

    def held(self, now_ms: int) -> bool:
        """Whether a live worker runs it (its lease has not run out)."""
        return self.state == "running" and self.lease > now_ms


class JobStore:
    """The jobs collection: submit, read, list, cancel, and what workers do with a job."""

    def __init__(self, solr: SolrClient, settings: JobsSettings) -> None:
        self._solr = solr
        self.settings = settings
        self._collection = settings.collection

    async def submit(
        self,
        caller: str,
        documents: list[SourceDocument] | FolderSync,
        kind: str,
        errors: list[DocumentError] | None = None,
    ) -> Job:
        """A new queued job (`errors`: what was left out before it, files not extracted);
        TooManyJobs (a 429) when the queue or this caller is full."""
        self._check_enabled()
        job_id = uuid.uuid4().hex
        if isinstance(documents, FolderSync):
            payload: object = asdict(documents)
        else:  # its pieces first, outside the admission (a large job takes long to write)
            payload = await self._call(
                job_payload.write(self._solr, self._collection, job_id, documents)
            )
        try:
            async with self._admission():
                return await self._admit(job_id, caller, documents, kind, errors, payload)
        except BaseException:
            if isinstance(payload, dict) and "pieces" in payload:
                with contextlib.suppress(ServiceError):
                    await asyncio.shield(self._forget(job_id, payload))
            raise

    async def _admit(
        self,
        job_id: str,
        caller: str,
        documents: list[SourceDocument] | FolderSync,
        kind: str,
        errors: list[DocumentError] | None,
        payload: object,
    ) -> Job:
        """The limits checked and the job written, by the one holder of the admission."""
        limits = self.settings
        if await self._count(ACTIVE) >= limits.max_queued:
            raise TooManyJobs(
                f"{limits.max_queued} jobs are waiting or running (jobs.max.queued); retry "
                "when one has finished",
                retry_after=RETRY_AFTER_SECONDS,
            )
        if await self._count(ACTIVE, f"{{!term f=caller_s}}{caller}") >= limits.max_per_caller:
            raise TooManyJobs(
                f"you have {limits.max_per_caller} jobs waiting or running "
                "(jobs.max.per.caller); retry when one has finished",
                retry_after=RETRY_AFTER_SECONDS,
            )
        doc = {
            "id": job_id,
            "state_s": "queued",
            "kind_s": kind,
            "caller_s": caller,
            "created_dt": timestamp(),
            "total_i": 0 if isinstance(documents, FolderSync) else len(documents),
            "done_i": 0,
            "failed_i": 0,
            "passages_i": 0,
            "embedded_i": 0,
            "next_i": 0,
            "lease_l": 0,
            "cancel_b": False,
            "errors_json": json.dumps([asdict(e) for e in errors or ()]),
            "payload": orjson.dumps(payload).decode(),  # a folder, or its pieces' note
        }
        await self._write([doc])
        return Job.of(doc)

    @asynccontextmanager
    async def _admission(self) -> AsyncIterator[None]:
        """Held by one submission at a time in the whole deployment (a lock document that
        only one writer can create: Solr's optimistic concurrency), so that counting the
        active jobs and writing the new one are one step: simultaneous submissions, in one
        worker or several, cannot all pass the limits. A holder that died leaves a lock
        whose lease runs out, then taken over. Busy for ADMISSION_WAIT_SECONDS: a 429."""
        holder = uuid.uuid4().hex
        deadline = time.monotonic() + ADMISSION_WAIT_SECONDS
        while not await self._lock(holder):
            if time.monotonic() > deadline:
                raise TooManyJobs(
                    "jobs are being submitted faster than they can be admitted; retry",
                    retry_after=1,
                )
            await asyncio.sleep(random.uniform(0.01, 0.05))
        try:
            yield
        finally:
            with contextlib.suppress(ServiceError):
                await asyncio.shield(self._unlock(holder))

    async def _lock(self, holder: str) -> bool:
        lock = {"id": ADMISSION_LOCK, "worker_s": holder, "lease_l": _now_ms() + ADMISSION_LEASE_MS}
        if await self._written_if(lock, version=-1):  # -1: only if there is none
            return True
        held = await self._solr.get(self._collection, ADMISSION_LOCK, "lease_l,_version_")
        if held is None or int(held.get("lease_l", 0)) > _now_ms():
            return False  # held (or just released: the next try may take it)
        # its holder died: taken over, unless another was first
        return await self._written_if(lock, version=held["_version_"])

    async def _written_if(self, doc: dict[str, object], *, version: int) -> bool:
        """`doc` written if the collection's copy is still `version` (Solr's optimistic
        concurrency); False when another writer changed it first (Solr's 409)."""
        try:
            await self._solr.add(self._collection, [{**doc, "_version_": version}])
        except UpstreamBadResponse as error:
            if _conflict(error):
                return False
            raise self._missing(error) from None
        return True

    async def _unlock(self, holder: str) -> None:
        held = await self._solr.get(self._collection, ADMISSION_LOCK, "worker_s,_version_")
        if held is not None and held.get("worker_s") == holder:
            with contextlib.suppress(UpstreamBadResponse):  # 409: taken over meanwhile
                await self._solr.update(
                    self._collection,
                    [("delete", {"id": ADMISSION_LOCK, "_version_": held["_version_"]})],
                )

    async def get(self, job_id: str) -> Job:
        self._check_enabled()
        found = await self._solr.get(self._collection, job_id, LISTED_FIELDS + ",_version_")
        if found is None:
            raise JobNotFound(f"no job {job_id[:64]!r} (GET /jobs lists them)")
        return Job.of(found)

    async def list(self, limit: int = 50) -> list[Job]:
        """The latest jobs, newest first."""
        self._check_enabled()
        latest = {"q": "*:*", "fq": "state_s:*", "sort": "created_dt desc", "rows": limit}
        found = await self._select({**latest, "fl": LISTED_FIELDS})
        return [Job.of(doc) for doc in found["response"]["docs"]]

    async def cancel(self, job_id: str) -> Job:
        """A queued job (or one whose worker died) is cancelled now; a running one after its
        batch in progress; a finished one stays as it is."""
        job = await self.get(job_id)
        if job.state in FINISHED:
            return job
        if job.state == "queued" or not job.held(_now_ms()):
            await self.update(job.id, state_s="cancelled", finished_dt=timestamp(), cancel_b=True)
            payload = await self._solr.get(self._collection, job.id, "payload")
            note = orjson.loads((payload or {}).get("payload") or "[]")
            if isinstance(note, dict) and "pieces" in note:
                await self._forget(job.id, note)
        else:
            await self.update(job.id, cancel_b=True)
        return await self.get(job_id)

    # -- what a worker does ------------------------------------------------------------------

    async def claim(self, worker: str) -> tuple[Job, JobDocuments | FolderSync] | None:
        """The oldest job that waits (or whose worker died), now this worker's, with its
        documents; None when there is none, the deployment runs jobs.max.running, or another
        worker claimed it first."""
        now = _now_ms()
        # what waits first: an idle service asks Solr once a poll, not twice (issue 70)
        waiting = f"state_s:queued OR (state_s:running AND lease_l:[* TO {now}])"
        found = await self._select(
            {"q": waiting, "sort": "created_dt asc", "rows": 1, "fl": "id,_version_"}
        )
        docs = found["response"]["docs"]
        if not docs:
            return None
        held = f"state_s:running AND lease_l:[{now + 1} TO *]"
        if await self._count(held) >= self.settings.max_running:
            return None
        job = await self.get(docs[0]["id"])
        if job.held(now) or job.state in FINISHED:
            return None
        changes: dict[str, object] = {
            "state_s": "running",
            "worker_s": worker,
            "lease_l": now + int(self.settings.lease_seconds * 1000),
        }
        if job.started is None:
            changes["started_dt"] = timestamp()
        try:
            await self.update(job.id, version=job.version, **changes)
        except UpstreamBadResponse as error:
            if _conflict(error):  # another worker was first
                return None
            raise
        payload = await self._solr.get(self._collection, job.id, "payload")
        work = orjson.loads((payload or {}).get("payload") or "[]")
        claimed = await self.get(job.id)
        if job.kind == "sync":
            return claimed, FolderSync(**work)
        if isinstance(work, dict):  # its pieces' note
            documents = StoredDocuments(self._solr, self._collection, job.id, work, job.total)
            return claimed, documents
        return claimed, ListedDocuments([job_payload.decoded(d) for d in work])  # written before

    async def update(self, job_id: str, *, version: int | None = None, **fields: object) -> None:
        """Atomic updates of some fields (`version`: only if the job is still that version)."""
        doc: dict[str, object] = {"id": job_id, **{k: {"set": v} for k, v in fields.items()}}
        if version is not None:
            doc["_version_"] = version
        await self._write([doc])

    async def renew(self, job_id: str, worker: str) -> None:
        await self.update(
            job_id, worker_s=worker, lease_l=_now_ms() + int(self.settings.lease_seconds * 1000)
        )

    async def cancel_requested(self, job_id: str) -> bool:
        found = await self._solr.get(self._collection, job_id, "cancel_b")
        return bool((found or {}).get("cancel_b"))

    # -- Solr ----------------------------------------------------------------------------------

    def _check_enabled(self) -> None:
        if not self.settings.enabled:
            raise FeatureDisabled("ingestion jobs are off: jobs.enabled=false in rag.properties")

    async def _write(self, docs: list[dict[str, object]]) -> None:
        try:
            await self._solr.add(self._collection, docs, commit=True)
        except UpstreamBadResponse as error:
            raise self._missing(error) from None

    async def _select(self, params: dict[str, object]) -> dict[str, Any]:
        try:
            return await self._solr.select(self._collection, params)  # type: ignore[arg-type]
        except UpstreamBadResponse as error:
            raise self._missing(error) from None

    async def _count(self, query: str, *filters: str) -> int:
        found = await self._select({"q": query, "fq": list(filters), "rows": 0})
        return int(found["response"]["numFound"])

    async def _forget(self, job_id: str, note: dict[str, Any]) -> None:
        await self._call(
            job_payload.forget(self._solr, self._collection, job_id, int(note["pieces"]))
        )

    async def _call(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except UpstreamBadResponse as error:
            raise self._missing(error) from None

    def _missing(self, error: UpstreamBadResponse) -> UpstreamBadResponse:
        """Solr's 404 for a collection it lacks, said with the fix."""
        if " 404 " not in error.reason:
            return error
        return UpstreamBadResponse(
            f"Solr has no collection {self._collection!r} (jobs.collection): create it from "
            "the configset solr/configsets/IngestJobs, or set jobs.enabled=false"
        )


def _conflict(error: UpstreamBadResponse) -> bool:
    """Solr's 409: a versioned write found another version (another writer was first)."""
    return " 409 " in error.reason


def timestamp() -> str:
    """Now, as Solr's dates are written."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def _now_ms() -> int:
    return int(time.time() * 1000)
