"""POST /ai/summarize: a summary of one FileShare document, or of posted text."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import DocumentId, OptionalLanguage
from service.api.payload import json_route
from service.api.protocols.answer import AnswerFields, UsageOut
from service.api.protocols.datafari6 import RagContent
from service.rag import assemble
from service.rag.request import SummarizeQuery
from service.retrieval import Scope

router = APIRouter(
    tags=["summarize"], dependencies=[Depends(require_api_key)], route_class=json_route()
)

MAX_TEXT_CHARS = 2_000_000


class SummarizeRequest(BaseModel):
    """Exactly one of `id` and `text`."""

    model_config = ConfigDict(extra="ignore")

    id: DocumentId | None = Field(None, description="The FileShare document to summarize.")
    text: str | None = Field(
        None, min_length=1, max_length=MAX_TEXT_CHARS, description="Text to summarize."
    )
    lang: OptionalLanguage = Field(
        None, description="ISO code of the summary's language (empty: the default)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> SummarizeRequest:
        if (self.id is None) == (self.text is None):
            raise ValueError("give either id or text, not both and not neither")
        return self

    def to_query(self, scope: Scope) -> SummarizeQuery:
        return SummarizeQuery(document_id=self.id, text=self.text, lang=self.lang, scope=scope)


class SummarizeResponse(BaseModel):
    """The answer of POST /ai/summarize, in Datafari's envelope."""

    status: str = "OK"
    content: RagContent
    timings: dict[str, float]
    usage: UsageOut


@router.post(
    "/ai/summarize", response_model=SummarizeResponse, responses=documented_errors(403, 404, 428)
)
async def summarize(
    body: SummarizeRequest, request: Request, snapshot: CurrentSnapshot
) -> SummarizeResponse:
    """Summarize a document; map-reduce over its parts when it exceeds one request."""
    scope = caller_of(request).scope
    reply = await assemble.summarize(snapshot, body.to_query(scope))
    fields = AnswerFields.of(await reply.complete(), summary=True)
    return SummarizeResponse(
        content=RagContent(message=fields.message, documents=fields.sources),
        timings=fields.timings,
        usage=fields.usage,
    )
