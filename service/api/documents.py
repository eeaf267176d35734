"""POST /documents and DELETE /documents/{id}: ingestion over HTTP (admin token required)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any, Self

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.api.auth import require_admin
from service.api.dependencies import CurrentSnapshot, runtime_of
from service.api.errors import documented_errors
from service.api.fields import DocumentId, OptionalLanguage
from service.api.payload import json_route
from service.chains.prompts import LANGUAGE_CODE
from service.errors import (
    BadRequest,
    DocumentNotFound,
    ExtractionFailed,
    PayloadTooLarge,
    TooLarge,
)
from service.ingest import IngestSummary, SourceDocument, extract_bytes
from service.ingest.indexer import with_source
from service.ingest.partitions import ID_PREFIX
from service.retrieval.scope import visible_to

# ingestion bodies are bounded by request.max.bytes only
router = APIRouter(
    tags=["ingestion"], dependencies=[Depends(require_admin)], route_class=json_route(None)
)


class DocumentIn(BaseModel):
    """One document to index, as POST /documents takes it."""

    model_config = ConfigDict(extra="ignore")

    id: DocumentId
    title: str = Field("", max_length=1000)
    url: str = Field("", max_length=4000)
    content: str = Field(min_length=1, max_length=5_000_000)
    language: OptionalLanguage = None  # none: detected by Solr at indexing
    allowed_groups: list[str] = Field(
        default_factory=list, max_length=1000, description="Who may see it; none: everyone."
    )
    denied_groups: list[str] = Field(default_factory=list, max_length=1000)

    @field_validator("id")
    @classmethod
    def _not_a_kaito_id(cls, value: str) -> str:
        if value.startswith(ID_PREFIX):
            raise ValueError(
                f"ids starting with {ID_PREFIX!r} belong to KAITO indexes: use POST /index"
            )
        return value

    def to_source(self) -> SourceDocument:
        return SourceDocument(
            id=self.id,
            title=self.title or self.id,
            url=self.url,
            content=self.content,
            language=self.language or "",
            allowed_groups=tuple(self.allowed_groups),
            denied_groups=tuple(self.denied_groups),
        )


class IngestRequest(BaseModel):
    """The body of POST /documents."""

    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)


class Replaced(BaseModel):
    """A document that one of another source replaced."""

    id: str
    source: str = Field(description="Where the replaced document came from.")


class IngestResult(BaseModel):
    """What an ingestion did."""

    documents: int = Field(description="Documents written (new or changed).")
    passages: int = Field(description="Passages written for them.")
    seconds: float
    unchanged: int = Field(0, description="Documents skipped: Solr holds them as they are.")
    embedded: int = Field(
        0, description="Passages embedded; the others kept the vector Solr stores for their text."
    )
    replaced: list[Replaced] = Field(
        default_factory=list,
        description="Documents of another source (a folder the CLI ingested, uploads, this "
        "API) that a document of this request replaced, having the same id.",
    )

    @classmethod
    def of(cls, summary: IngestSummary, **more: Any) -> Self:
        return cls(
            documents=summary.documents,
            passages=summary.passages,
            seconds=round(summary.seconds, 3),
            unchanged=summary.unchanged,
            embedded=summary.embedded,
            replaced=[Replaced(id=i, source=source) for i, source in summary.replaced],
            **more,
        )


class IngestResponse(BaseModel):
    """The answer of POST /documents and DELETE /documents/{id}."""

    status: str = "OK"
    content: IngestResult


@router.post("/documents", response_model=IngestResponse, responses=documented_errors(401, 403))
async def ingest(body: IngestRequest, snapshot: CurrentSnapshot) -> IngestResponse:
    """Index documents into FileShare and their embedded passages into VectorMain; a document
    whose id exists is replaced, passages included."""
    documents = [with_source(d.to_source(), "api") for d in body.documents]
    summary = await snapshot.indexer.run(documents)
    return IngestResponse(content=IngestResult.of(summary))


class ListedDocument(BaseModel):
    """A document of the main corpus, without its text."""

    model_config = ConfigDict(extra="ignore")

    id: str
    title: str = ""
    url: str = ""
    language: str = ""
    last_modified: str = ""
    allowed_groups: list[str] = Field(default_factory=list)
    denied_groups: list[str] = Field(default_factory=list)


class DocumentPage(BaseModel):
    """One page of the indexed documents."""

    documents: list[ListedDocument]
    total: int = Field(description="Documents matching the filters, on every page.")
    limit: int
    offset: int


class DocumentPageResponse(BaseModel):
    """The answer of GET /documents."""

    status: str = "OK"
    content: DocumentPage


@router.get("/documents", response_model=DocumentPageResponse, responses=documented_errors(401))
async def list_documents(
    request: Request,
    snapshot: CurrentSnapshot,
    limit: int = Query(20, ge=1, le=100),
    offset: int = Query(0, ge=0, le=100_000),
    id_prefix: str | None = Query(None, max_length=512, description="Ids that start so."),
    language: str | None = Query(None, max_length=16, pattern=LANGUAGE_CODE.pattern),
    group: str | None = Query(None, max_length=256, description="Visible to this group."),
) -> DocumentPageResponse:
    """What is indexed (FileShare's documents, by id), a page at a time, optionally only ids
    under a prefix (a folder), one language, or what one group may see."""
    settings = snapshot.settings
    fields = settings.solr.documents_map
    filters = []
    if id_prefix:
        filters.append(f"{{!prefix f={fields.field('id')}}}" + id_prefix)
    if language:
        filters.append(f"{{!term f={fields.field('language')}}}" + language)
    if group is not None:
        filters += visible_to([group], settings.security.model)
    documents, total = await snapshot.indexer.page(
        limit=limit, offset=offset, filters=filters, fields=fields
    )
    return DocumentPageResponse(
        content=DocumentPage(
            documents=[ListedDocument.model_validate(doc) for doc in documents],
            total=total,
            limit=limit,
            offset=offset,
        )
    )


class Skipped(BaseModel):
    """A file that was not ingested, and why."""

    file: str
    reason: str


class UploadResult(IngestResult):
    """What an upload did, skipped files included."""

    skipped: list[Skipped] = Field(description="Files not ingested, and why.")


class UploadResponse(BaseModel):
    """The answer of POST /documents/files."""

    status: str = "OK"
    content: UploadResult


MAX_FILES = 100
MAX_ID_CHARS = 512
# the text one upload may bring in all (each document also within MAX_DOCUMENT_CHARS)
MAX_UPLOAD_CHARS = 20_000_000


@router.post(
    "/documents/files",
    response_model=UploadResponse,
    responses=documented_errors(401, 403),
)
async def upload(
    request: Request,
    snapshot: CurrentSnapshot,
    files: Annotated[list[UploadFile], File(description="PDF, DOCX, HTML, Markdown or text.")],
    language: Annotated[OptionalLanguage, Form()] = None,
    allowed_groups: Annotated[str, Form(description="Comma-separated; none: public.")] = "",
) -> UploadResponse:
    """Upload files: each becomes a FileShare document with embedded passages, its id the
    file's relative path as sent (`teamA/report.txt`; `..` and leading `/` dropped), as the
    CLI names files below an ingested folder. Page and section boundaries stay passage
    boundaries. A corrupt, encrypted or unsupported file, or a second file with the same id,
    is skipped and reported; the others are ingested. A file that decompresses past the
    limits (a zip bomb) fails the upload with a 413 naming it. Extraction runs in a worker
    process, off the event loop."""
    documents, skipped = await extracted_uploads(request, files, allowed_groups, language or "")
    summary = await snapshot.indexer.run(documents)
    return UploadResponse(content=UploadResult.of(summary, skipped=skipped))


async def extracted_uploads(
    request: Request, files: list[UploadFile], allowed_groups: str, language: str
) -> tuple[list[SourceDocument], list[Skipped]]:
    """The uploaded files as documents (extracted in the worker process), and those skipped;
    PayloadTooLarge when a file or their text in all is past the limits."""
    if len(files) > MAX_FILES:
        raise BadRequest(f"at most {MAX_FILES} files per request")
    runtime = runtime_of(request)
    groups = tuple(g.strip() for g in allowed_groups.split(",") if g.strip())
    documents: list[SourceDocument] = []
    skipped: list[Skipped] = []
    for upload_file in files:
        name = upload_id(upload_file.filename or "")
        if any(document.id == name for document in documents):
            skipped.append(Skipped(file=name, reason="another file of this upload has this id"))
            continue
        try:
            document = await runtime.extractor.run(
                extract_bytes, name, await upload_file.read(), document_id=name, language=language
            )
        except TooLarge as error:
            raise PayloadTooLarge(f"{name}: {error}") from None
        except ExtractionFailed as error:  # UnsupportedFile too
            skipped.append(Skipped(file=name, reason=str(error)))
            continue
        documents.append(with_source(replace(document, allowed_groups=groups), "upload"))
        extracted = sum(len(d.content) for d in documents)
        if extracted > MAX_UPLOAD_CHARS:
            raise PayloadTooLarge(
                f"the files' text reaches {extracted:,} characters at {name}, over the "
                f"{MAX_UPLOAD_CHARS:,} one upload may bring: send fewer files at once"
            )
    return documents, skipped


def upload_id(filename: str) -> str:
    """The id of an uploaded file: its path as sent, relative, with / separators."""
    parts = [part for part in re.split(r"[\\/]+", filename) if part not in ("", ".", "..")]
    name = "/".join(parts)[-MAX_ID_CHARS:].lstrip("/")
    return "".join(char for char in name if char.isprintable()) or "upload"


@router.delete(
    "/documents/{document_id:path}",
    response_model=IngestResponse,
    responses=documented_errors(401, 403, 404),
)
async def delete(
    document_id: Annotated[str, PathParam(max_length=MAX_ID_CHARS)], snapshot: CurrentSnapshot
) -> IngestResponse:
    """Remove a document and its passages; ids may hold `/` (`folder/x.txt`, or `%2F`).
    404 when there is no such document."""
    passages = await snapshot.indexer.delete(document_id)
    if passages is None:
        raise DocumentNotFound(f"no document with id {document_id!r} in FileShare")
    return IngestResponse(content=IngestResult(documents=1, passages=passages, seconds=0.0))
