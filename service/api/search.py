"""GET /search/vector: Datafari's vector search API, the passages nearest to a question."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import MAX_QUERY_PARAM
from service.api.payload import json_route
from service.errors import BadRequest, ModelNotServed
from service.text import sanitize_query

router = APIRouter(
    tags=["search"], dependencies=[Depends(require_api_key)], route_class=json_route()
)


class PassageOut(BaseModel):
    """A passage found by /search/vector, with its score."""

    id: str
    parent_id: str | None
    title: str
    url: str
    content: str
    score: float


class PassagesContent(BaseModel):
    """The passages found."""

    documents: list[PassageOut]


class VectorSearchResponse(BaseModel):
    """The answer of GET /search/vector."""

    status: str = "OK"
    content: PassagesContent


@router.get("/search/vector", response_model=VectorSearchResponse, responses=documented_errors())
async def vector_search(
    request: Request,
    snapshot: CurrentSnapshot,
    queryrag: str | None = Query(None, max_length=MAX_QUERY_PARAM, description="The question."),
    q: str | None = Query(None, max_length=MAX_QUERY_PARAM, description="Alias of queryrag."),
    topK: int | None = Query(None, ge=1, le=1000, description="Passages to return."),
    model: str | None = Query(None, max_length=200, description="Embedding model name."),
) -> VectorSearchResponse:
    settings = snapshot.settings
    text = sanitize_query(queryrag or q)
    if not text:
        raise BadRequest("queryrag (or q) is required")
    retriever = snapshot.vector_retriever(model=model, top_k=topK, scope=caller_of(request).scope)
    if model and model != settings.embeddings.model:
        served = await snapshot.embeddings.list_models()
        if model not in served:
            raise BadRequest(
                f"model {model!r} is not served by the embeddings API; use one of "
                f"{', '.join(served) or settings.embeddings.model}"
            )
    try:
        passages = await retriever.run(text)
    except ModelNotServed as error:  # listed by the API, yet it cannot embed (a chat model)
        raise BadRequest(f"model {model!r} cannot embed text: {error.reason}") from None
    return VectorSearchResponse(
        content=PassagesContent(
            documents=[
                PassageOut(
                    id=p.id,
                    parent_id=p.parent_id,
                    title=p.title,
                    url=p.url,
                    content=p.content,
                    score=p.score,
                )
                for p in passages
            ]
        )
    )
