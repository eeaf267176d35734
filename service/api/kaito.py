"""KAITO RAGEngine's index API (its client, `kaito-rag-engine-client`, works unchanged): named
indexes of documents, kept in Solr (service.ingest.partitions). Admin token required, like our
ingestion API."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.actions.search import shown_score
from service.api.auth import require_admin
from service.api.dependencies import CurrentSnapshot, request_snapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import MAX_QUERY_PARAM
from service.api.payload import json_route
from service.errors import BadRequest
from service.ingest.partitions import IndexedDocument, Partitions, doc_id_of, metadata_filters
from service.text import sanitize_query

# /index ingests documents: bounded by request.max.bytes only
router = APIRouter(
    tags=["kaito indexes"], dependencies=[Depends(require_admin)], route_class=json_route(None)
)

MAX_DOCUMENTS = 1000
MAX_TEXT_CHARS = 5_000_000
# in a path: KAITO's index name (checked fully by service.ingest.partitions)
IndexName = Annotated[str, Path(max_length=64, description="The index's name.")]
# a KAITO doc_id: printable, no "/" (it is the last part of the Solr id kaito/<index>/<doc_id>)
DocId = Annotated[str, StringConstraints(max_length=512, pattern=r"^[^\x00-\x1f\x7f/]*$")]


class Document(BaseModel):
    """A document of an index (KAITO's Document)."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    doc_id: DocId = ""
    metadata: dict[str, Any] | None = None
    hash_value: str | None = None
    is_truncated: bool = False

    def triple(self) -> tuple[str, str, dict[str, Any]]:
        return self.doc_id, self.text, self.metadata or {}

    @classmethod
    def of(cls, document: IndexedDocument) -> Document:
        return cls(
            text=document.text or " ",
            doc_id=document.doc_id,
            metadata=document.metadata,
            hash_value=document.hash_value,
            is_truncated=document.is_truncated,
        )


class IndexRequest(BaseModel):
    """POST /index: documents added to an index (created by its first document)."""

    index_name: str = Field(max_length=64)
    documents: list[Document] = Field(min_length=1, max_length=MAX_DOCUMENTS)


class UpdateDocumentRequest(BaseModel):
    """POST /indexes/{name}/documents: documents of the index rewritten."""

    documents: list[Document] = Field(min_length=1, max_length=MAX_DOCUMENTS)


class UpdateDocumentResponse(BaseModel):
    """Which documents changed, which were the same, which the index does not have."""

    updated_documents: list[Document]
    unchanged_documents: list[Document]
    not_found_documents: list[Document]


class DeleteDocumentRequest(BaseModel):
    """POST /indexes/{name}/documents/delete."""

    doc_ids: list[DocId] = Field(min_length=1, max_length=MAX_DOCUMENTS)


class DeleteDocumentResponse(BaseModel):
    """Which doc_ids were deleted, which the index did not have."""

    deleted_doc_ids: list[str]
    not_found_doc_ids: list[str]


class ListDocumentsResponse(BaseModel):
    """One page of an index's documents."""

    documents: list[Document]
    count: int
    total_items: int


class RetrieveRequest(BaseModel):
    """POST /retrieve: the passages of an index that best match a query."""

    index_name: str = Field(max_length=64)
    query: str = Field(min_length=1, max_length=20_000)
    max_node_count: int = Field(5, ge=1, le=300)
    metadata_filter: dict[str, Any] | None = None


class NodeWithScore(BaseModel):
    """One retrieved passage (BM25: document) with its score."""

    doc_id: str
    node_id: str
    text: str
    score: float
    source: str | None = None
    metadata: dict[str, Any] | None = None


class RetrieveResponse(BaseModel):
    """The nodes found for the query, best first."""

    query: str
    results: list[NodeWithScore]
    count: int


@router.post("/index", response_model=list[Document], responses=documented_errors())
async def create_index(body: IndexRequest, request: Request) -> list[Document]:
    """Adds documents to an index, creating it; doc_ids are given to documents without."""
    added = await _indexes(request).add(body.index_name, [d.triple() for d in body.documents])
    return [Document.of(document) for document in added]


@router.get("/indexes", response_model=list[str], responses=documented_errors())
async def list_indexes(request: Request) -> list[str]:
    """The names of the indexes."""
    return await _indexes(request).names()


@router.get(
    "/indexes/{index_name}/documents",
    response_model=ListDocumentsResponse,
    responses=documented_errors(404),
)
async def list_documents(
    index_name: IndexName,
    request: Request,
    limit: int = Query(10, ge=1, le=100),
    offset: int = Query(0, ge=0, le=100_000),
    max_text_length: int | None = Query(1000, ge=1, le=MAX_TEXT_CHARS),
    metadata_filter: str | None = Query(
        None, max_length=MAX_QUERY_PARAM, description="A JSON object."
    ),
) -> ListDocumentsResponse:
    """A page of the index's documents, texts cut at `max_text_length`."""
    documents, total = await _indexes(request).documents(
        index_name,
        limit=limit,
        offset=offset,
        max_text_length=max_text_length,
        metadata_filter=_json_object(metadata_filter),
    )
    shown = [Document.of(document) for document in documents]
    return ListDocumentsResponse(documents=shown, count=len(shown), total_items=total)


@router.post(
    "/indexes/{index_name}/documents",
    response_model=UpdateDocumentResponse,
    responses=documented_errors(404),
)
async def update_documents(
    index_name: IndexName, body: UpdateDocumentRequest, request: Request
) -> UpdateDocumentResponse:
    """Rewrites the documents the index has (by doc_id); reports the others."""
    updated, unchanged, missing = await _indexes(request).update(
        index_name, [d.triple() for d in body.documents]
    )
    return UpdateDocumentResponse(
        updated_documents=[Document.of(d) for d in updated],
        unchanged_documents=[Document.of(d) for d in unchanged],
        not_found_documents=[Document.of(d) for d in missing],
    )


@router.post(
    "/indexes/{index_name}/documents/delete",
    response_model=DeleteDocumentResponse,
    responses=documented_errors(404),
)
async def delete_documents(
    index_name: IndexName, body: DeleteDocumentRequest, request: Request
) -> DeleteDocumentResponse:
    """Deletes documents (and their passages) by doc_id."""
    deleted, missing = await _indexes(request).delete(index_name, body.doc_ids)
    return DeleteDocumentResponse(deleted_doc_ids=deleted, not_found_doc_ids=missing)


@router.delete("/indexes/{index_name}", responses=documented_errors(404))
async def delete_index(index_name: IndexName, request: Request) -> dict[str, str]:
    """Deletes the index: every document and passage in it."""
    await _indexes(request).drop(index_name)
    return {"message": f"Successfully deleted index {index_name}."}


@router.post("/retrieve", response_model=RetrieveResponse, responses=documented_errors(404))
async def retrieve(
    body: RetrieveRequest, request: Request, snapshot: CurrentSnapshot
) -> RetrieveResponse:
    """The passages of the index that best match the query, by the configured retrieval."""
    query = sanitize_query(body.query)
    if not query:
        raise BadRequest("the query is empty once sanitized")
    indexes = snapshot.partitions
    await indexes.require(body.index_name)
    scope = caller_of(request).scope.in_partition(
        body.index_name, metadata_filters(body.metadata_filter)
    )
    found = await snapshot.index_retriever(scope, body.max_node_count).run(query)
    found = found[: body.max_node_count]
    doc_ids = [doc_id_of(body.index_name, node.source_id) for node in found]
    metadata = await indexes.metadata(body.index_name, doc_ids)
    results = [
        NodeWithScore(
            doc_id=doc_id,
            node_id=node.id,
            text=node.content,
            score=shown_score(node.score, rank, snapshot.settings.security),
            source=node.url or None,
            metadata=metadata.get(doc_id) or None,
        )
        for rank, (doc_id, node) in enumerate(zip(doc_ids, found, strict=True), start=1)
    ]
    return RetrieveResponse(query=body.query, results=results, count=len(results))


@router.post("/persist/{index_name}", responses=documented_errors(404))
async def persist_index(
    index_name: IndexName,
    request: Request,
    path: str | None = Query(None, max_length=MAX_QUERY_PARAM),
) -> dict[str, str]:
    """Nothing to do: Solr has kept every change since its commit (KAITO writes files here)."""
    await _indexes(request).require(index_name)
    return {"message": f"Index {index_name} is kept by Solr; nothing to persist."}


@router.post("/load/{index_name}", responses=documented_errors(404))
async def load_index(
    index_name: IndexName,
    request: Request,
    path: str | None = Query(None, max_length=MAX_QUERY_PARAM),
    overwrite: bool = False,
) -> dict[str, str]:
    """Nothing to do: the index is already served from Solr (KAITO reads files here)."""
    await _indexes(request).require(index_name)
    return {"message": f"Index {index_name} is served from Solr; nothing to load."}


def _indexes(request: Request) -> Partitions:
    return request_snapshot(request).partitions


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise BadRequest('metadata_filter must be a JSON object, e.g. {"author": "Kim"}')
    return value
