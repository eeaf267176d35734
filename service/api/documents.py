"""POST /documents and DELETE /documents/{id}: ingestion over HTTP (admin token required)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from service.api.auth import require_admin
from service.api.errors import documented_errors
from service.api.fields import DocumentId, LanguageCode
from service.api.runtime import Runtime
from service.ingest import SourceDocument

router = APIRouter(tags=["ingestion"], dependencies=[Depends(require_admin)])


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: DocumentId
    title: str = Field("", max_length=1000)
    url: str = Field("", max_length=4000)
    content: str = Field(min_length=1, max_length=5_000_000)
    language: LanguageCode = "en"
    allowed_groups: list[str] = Field(
        default_factory=list, max_length=1000, description="Who may see it; none: everyone."
    )
    denied_groups: list[str] = Field(default_factory=list, max_length=1000)

    def to_source(self) -> SourceDocument:
        return SourceDocument(
            id=self.id,
            title=self.title or self.id,
            url=self.url,
            content=self.content,
            language=self.language,
            allowed_groups=tuple(self.allowed_groups),
            denied_groups=tuple(self.denied_groups),
        )


class IngestRequest(BaseModel):
    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)


class IngestResult(BaseModel):
    documents: int
    passages: int
    seconds: float


class IngestResponse(BaseModel):
    status: str = "OK"
    content: IngestResult


@router.post("/documents", response_model=IngestResponse, responses=documented_errors(401, 403))
async def ingest(body: IngestRequest, request: Request) -> IngestResponse:
    """Index documents into FileShare and their embedded passages into VectorMain; a document
    whose id exists is replaced, passages included."""
    runtime: Runtime = request.app.state.runtime
    summary = await runtime.indexer(runtime.settings()).run([d.to_source() for d in body.documents])
    return IngestResponse(
        content=IngestResult(
            documents=summary.documents,
            passages=summary.passages,
            seconds=round(summary.seconds, 3),
        )
    )


@router.delete(
    "/documents/{document_id}", response_model=IngestResponse, responses=documented_errors(401, 403)
)
async def delete(document_id: str, request: Request) -> IngestResponse:
    """Remove a document and its passages (no error when it was not there)."""
    runtime: Runtime = request.app.state.runtime
    await runtime.indexer(runtime.settings()).delete(document_id)
    return IngestResponse(content=IngestResult(documents=1, passages=0, seconds=0.0))
