"""GET /search/select (and Datafari's `/Datafari/rest/v2.0/search/select`): Datafari's search
API, as its search UI and its MCP server's `datafari_search` tool call it, answered in Solr's
JSON shape over the documents collection, within what the caller may see.

    GET /search/select?q=assert%20statement&fl=title,url,id,docId,extension,preview_content
                      &sort=score%20desc&q.op=AND&rows=10&start=0&wt=json

    {"responseHeader": {"status": 0, "QTime": 12, "params": {...}},
     "response": {"numFound": 2, "start": 0, "docs": [{"id": ..., "docId": ..., "title": [...],
                  "url": ..., "preview_content": [...], "extension": ..., "score": ...}]}}

Honoured: `q` (BM25, the documents collection), `q.op` (AND, OR), `rows` (more than MAX_ROWS,
or past MAX_DEPTH, are cut to them: an MCP host asks any number, and a 4xx fails its tool),
`start` (at most MAX_DEPTH), `fl` (among FIELDS; others left out), `sort` (by
relevance only: `score desc`), `fq` (each read by the facet grammar, as /ai's filters: a
facet's filter, never widening the caller's scope), `wt=json`. Every other Solr parameter
(local params, `qt`, `shards`, `stream.*`, `defType`, `rq`...) is ignored: nothing of the
request reaches Solr but the question's words and the facets' values. `numFound` is Solr's:
every document the words match, within the caller's scope and the filters.

`action=rag` is Datafari's deprecated RAG through the search API: POST /ai/rag's answer.
"""

from __future__ import annotations

import time
from pathlib import PurePosixPath
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from service.actions.search import MAX_DEPTH, documents_found, shown_score
from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import caller_of
from service.api.errors import documented_errors
from service.api.fields import MAX_QUERY_PARAM
from service.api.payload import json_route
from service.api.protocols.datafari6 import RagResponse
from service.api.rag import RagRequest, rag
from service.errors import BadRequest
from service.retrieval.base import RetrievedDocument
from service.text import sanitize_query

router = APIRouter(
    tags=["search"], dependencies=[Depends(require_api_key)], route_class=json_route()
)

MAX_ROWS = 100  # documents a page, at most (more asked: these)
MAX_ROWS_ASKED = 1_000_000
MAX_FILTERS = 10
PREVIEW_CHARS = 500  # of a document's text, as its preview_content
FIELDS = ("id", "docId", "title", "url", "preview_content", "extension", "score")
SCORE_ORDER = ("", "score desc")
Filters = Annotated[list[str] | None, Query(max_length=MAX_FILTERS, description="Facet filters.")]


@router.get(
    "/search/select",
    response_model=None,
    responses={
        200: {
            "description": "Solr's JSON shape: responseHeader, response {numFound, start, "
            "docs}; with action=rag, POST /ai/rag's answer."
        },
        **documented_errors(403, 404, 428),
    },
)
async def select(
    request: Request,
    snapshot: CurrentSnapshot,
    q: str = Query(min_length=1, max_length=MAX_QUERY_PARAM, description="The words searched."),
    action: str | None = Query(None, max_length=64, description="`rag`: an answer instead."),
    fl: str = Query("", max_length=1000, description=f"Fields among {', '.join(FIELDS)}."),
    rows: int = Query(10, ge=0, le=MAX_ROWS_ASKED, description="Documents (100 at most)."),
    start: int = Query(0, ge=0, le=MAX_DEPTH, description="Documents to skip."),
    operator: str = Query("", alias="q.op", max_length=8, description="AND or OR."),
    sort: str = Query("", max_length=100, description="`score desc` (by relevance)."),
    wt: str = Query("json", max_length=16, description="json."),
    fq: Filters = None,
    format: str | None = Query(None, max_length=64, description="action=rag: as on /ai/rag."),
    lang: str | None = Query(None, max_length=64, description="action=rag: as on /ai/rag."),
    id: str | None = Query(None, max_length=512, description="action=rag: as on /ai/rag."),
) -> JSONResponse | RagResponse:
    """Datafari's search API (Solr's JSON shape), or with action=rag its deprecated RAG."""
    if action == "rag":
        try:
            body = RagRequest.model_validate({"query": q, "format": format, "lang": lang,
                                              "id": id})  # fmt: skip
        except ValidationError as error:
            raise RequestValidationError(error.errors()) from None
        return await rag(body, request, snapshot)  # type: ignore[return-value]
    if action:
        raise BadRequest(f"action={action[:64]!r}: none (a search) or action=rag (an answer)")
    if wt.lower() != "json":
        raise BadRequest(f"wt={wt[:16]!r}: this search answers wt=json only")
    if operator.upper() not in ("", "AND", "OR"):
        raise BadRequest("q.op is AND or OR")
    if " ".join(sort.lower().split()) not in SCORE_ORDER:
        raise BadRequest("sort: this search orders by relevance only (score desc)")
    rows = min(rows, MAX_ROWS, MAX_DEPTH - start)
    started = time.perf_counter()
    words = sanitize_query(q)
    scope = caller_of(request).scope
    found, matched = await documents_found(
        snapshot, scope, words, start + rows, operator.upper(), fq or []
    )
    wanted = [f for f in (part.strip() for part in fl.split(",")) if f in FIELDS] or list(FIELDS)
    security = snapshot.settings.security
    docs = [
        _doc(document, wanted, shown_score(document.score, start + number, security))
        for number, document in enumerate(found[start : start + rows], start=1)
    ]
    took = round((time.perf_counter() - started) * 1000)
    params = {"q": q, "rows": str(rows), "start": str(start), "wt": "json"}
    return JSONResponse(
        {
            "responseHeader": {"status": 0, "QTime": took, "params": params},
            "response": {"numFound": matched, "start": start, "docs": docs},
        }
    )


def _doc(document: RetrievedDocument, fields: list[str], score: float) -> dict[str, object]:
    """One document as Solr returns it (title and preview_content multi-valued), with the
    score its caller may be shown (service.actions.search.shown_score)."""
    values: dict[str, object] = {
        "id": document.id,
        "docId": document.id,
        "title": [document.title] if document.title else [],
        "url": document.url,
        "preview_content": [document.content[:PREVIEW_CHARS]],
        "extension": _extension(document.url or document.id),
        "score": score,
    }
    return {field: values[field] for field in fields}


def _extension(address: str) -> str:
    """The file extension of a document's address (Datafari's `extension`), "" when none."""
    try:
        path = urlsplit(address).path or address
    except ValueError:
        return ""
    return PurePosixPath(path).suffix.lstrip(".").lower()[:16]
