"""/jobs: ingestion in the background, watched, cancelled and resumed (service.ingest.jobs).

POST   /jobs            the body POST /documents takes -> 202 {"id", "state": "queued"}
POST   /jobs/upload     files, as POST /documents/upload takes them -> 202
GET    /jobs            the latest jobs
GET    /jobs/{id}       state, documents done / failed / total, passages, rate, ETA, errors
DELETE /jobs/{id}       cancel (after the batch in progress)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, File, Form, Path, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from service.api.auth import require_admin
from service.api.dependencies import CurrentSnapshot
from service.api.documents import DocumentIn, Skipped, extracted_uploads
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import OptionalLanguage
from service.api.openai_schema import request_body
from service.api.payload import json_route
from service.config import Settings
from service.errors import BadRequest, ServiceError
from service.ingest.extract import SourceDocument
from service.ingest.folder import allowed_folder
from service.ingest.indexer import with_source
from service.ingest.jobs import DocumentError, FolderSync, Job, JobStore
from service.snapshot import Snapshot

# job bodies are bounded by jobs.max.bytes (BodySizeLimit, through body_limit), not by the
# question endpoints' size
router = APIRouter(
    tags=["jobs"], dependencies=[Depends(require_admin)], route_class=json_route(None)
)
JOB_PATHS = ("/jobs", "/jobs/upload")

MAX_JOB_DOCUMENTS = 100_000
JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]


class JobRequest(BaseModel):
    """The body of POST /jobs: POST /documents' body, with more documents."""

    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_JOB_DOCUMENTS)


class SyncRequest(BaseModel):
    """The body of POST /jobs/sync."""

    folder: str = Field(
        min_length=1, max_length=4096, pattern=r"^[^\x00-\x1f]+$", description="An absolute path."
    )
    source: str | None = Field(
        None,
        max_length=200,
        pattern=r"^[\w.-]*$",
        description="What the documents' ids start with (default: the folder's name).",
    )
    language: OptionalLanguage = None  # none: detected by Solr at indexing


class JobError(BaseModel):
    id: str
    reason: str


class JobOut(BaseModel):
    """An ingestion job as it is now."""

    id: str
    state: str = Field(description="queued, running, done, failed (every document) or cancelled.")
    kind: str = Field(description="documents (POST /jobs) or upload (POST /jobs/upload).")
    total: int = Field(description="Documents in the job.")
    done: int = Field(description="Documents behind it: indexed, unchanged or failed.")
    failed: int
    passages: int = Field(description="Passages written.")
    embedded: int = Field(description="Passages embedded (the others kept their vectors).")
    rate: float | None = Field(None, description="Documents a second since it started.")
    eta_seconds: float | None = Field(None, description="Seconds left at that rate.")
    cancel_requested: bool
    created: str
    started: str | None
    finished: str | None
    message: str
    errors: list[JobError] = Field(description="Documents that failed, the first 100.")

    @classmethod
    def of(cls, job: Job) -> JobOut:
        rate = eta = None
        if job.started and job.done:
            end = (
                _parsed(job.finished) if job.finished else datetime.now(_parsed(job.started).tzinfo)
            )
            seconds = (end - _parsed(job.started)).total_seconds()
            if seconds > 0:
                rate = round(job.done / seconds, 2)
                eta = round((job.total - job.done) / rate, 1) if job.state == "running" else 0.0
        return cls(
            id=job.id,
            state=job.state,
            kind=job.kind,
            total=job.total,
            done=job.done,
            failed=job.failed,
            passages=job.passages,
            embedded=job.embedded,
            rate=rate,
            eta_seconds=eta,
            cancel_requested=job.cancel_requested,
            created=job.created,
            started=job.started,
            finished=job.finished,
            message=job.message,
            errors=[JobError(id=e.id, reason=e.reason) for e in job.errors],
        )


class JobList(BaseModel):
    jobs: list[JobOut]


def _store(snapshot: Snapshot) -> JobStore:
    return JobStore(snapshot.solr, snapshot.settings.jobs)


@router.post(
    "/jobs",
    status_code=202,
    response_model=JobOut,
    responses=documented_errors(401, 403, 413, 429),
    openapi_extra={"requestBody": request_body(JobRequest)},
)
async def submit(request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """Ingest documents in the background (up to 100,000, within jobs.max.bytes): 202 with
    the job, to watch at GET /jobs/{id}."""
    body = await request.json()  # parsed off the event loop when large (service.api.payload)
    documents = await anyio.to_thread.run_sync(_documents_of, body)  # validated there too
    return await _queued(snapshot, request, documents, "documents")


def _documents_of(body: object) -> list[SourceDocument]:
    try:
        job = JobRequest.model_validate(body)
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_url=False)) from None
    return [with_source(d.to_source(), "api") for d in job.documents]


def body_limit(settings: Settings, path: str) -> tuple[int, str]:
    """The largest body a request to `path` may send, and the key that says so."""
    if path in JOB_PATHS:
        return settings.jobs.max_bytes, "jobs.max.bytes"
    return settings.server.request_max_bytes, "request.max.bytes"


@router.post(
    "/jobs/upload",
    status_code=202,
    response_model=JobOut,
    responses=documented_errors(401, 403, 413, 429),
)
async def submit_upload(
    request: Request,
    snapshot: CurrentSnapshot,
    files: Annotated[list[UploadFile], File(description="PDF, DOCX, HTML, Markdown or text.")],
    language: Annotated[OptionalLanguage, Form()] = None,
    allowed_groups: Annotated[str, Form(description="Comma-separated; none: public.")] = "",
) -> JSONResponse:
    """Files extracted now (as POST /documents/upload does; skipped files are in the job's
    errors), indexed in the background."""
    documents, skipped = await extracted_uploads(request, files, allowed_groups, language or "")
    if not documents:
        reasons = "; ".join(f"{item.file}: {item.reason}" for item in skipped[:5])
        raise BadRequest(f"no file could be extracted ({reasons})")
    return await _queued(snapshot, request, documents, "upload", skipped)


@router.post(
    "/jobs/sync", status_code=202, response_model=JobOut, responses=documented_errors(401, 403, 429)
)
async def submit_sync(
    body: SyncRequest, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """Bring the index in step with a folder of the server (one of jobs.sync.folders, or
    below): new and changed files indexed, unchanged ones skipped by their hash, and the
    documents of its source whose file is gone deleted (not when a file could not be read)."""
    folder = allowed_folder(body.folder, snapshot.settings.jobs.sync_folders)
    source = body.source if body.source is not None else folder.name
    work = FolderSync(folder=str(folder), source=source or "files", language=body.language or "")
    return await _queued(snapshot, request, work, "sync")


def _submitter(request: Request) -> str:
    """Whose job it is, for the per-caller queue (the admin token proves the right): the
    caller the door names (person, key, address), or its address when its credentials name
    nobody (an admin needs no API key)."""
    try:
        return caller_of(request).name
    except ServiceError:
        client = request.client
        return "address:" + (client.host if client else "unknown")


async def _queued(
    snapshot: Snapshot,
    request: Request,
    documents: list[SourceDocument] | FolderSync,
    kind: str,
    skipped: list[Skipped] | None = None,
) -> JSONResponse:
    """The job queued; files skipped at extraction are its first errors."""
    store = _store(snapshot)
    errors = [DocumentError(item.file, item.reason) for item in skipped or ()]
    job = await store.submit(_submitter(request), documents, kind, errors)
    return JSONResponse(JobOut.of(job).model_dump(), status_code=202)


@router.get("/jobs", response_model=JobList, responses=documented_errors(401, 403))
async def list_jobs(snapshot: CurrentSnapshot) -> JobList:
    """The latest 50 jobs, newest first."""
    return JobList(jobs=[JobOut.of(job) for job in await _store(snapshot).list()])


@router.get("/jobs/{job_id}", response_model=JobOut, responses=documented_errors(401, 403, 404))
async def get_job(job_id: JobId, snapshot: CurrentSnapshot) -> JobOut:
    """A job's state and progress."""
    return JobOut.of(await _store(snapshot).get(job_id))


@router.delete("/jobs/{job_id}", response_model=JobOut, responses=documented_errors(401, 403, 404))
async def cancel_job(job_id: JobId, snapshot: CurrentSnapshot) -> JobOut:
    """Cancel a job: now if it waits, after the batch in progress if it runs (every document
    is then indexed whole or not at all); a finished job is left as it is."""
    return JobOut.of(await _store(snapshot).cancel(job_id))


def _parsed(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
