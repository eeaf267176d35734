"""A deterministic `/rerank` API for tests (Cohere's shape, which Jina, vLLM and TEI share):
real HTTP, recording, scriptable to fail.

A document's score is the share of the query's words it holds, so a test knows the order it
must get back without any model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

_WORD = re.compile(r"\w+")


def overlap(query: str, document: str) -> float:
    """The share of the query's distinct words the document holds (0 to 1)."""
    asked = {word.lower() for word in _WORD.findall(query)}
    held = {word.lower() for word in _WORD.findall(document)}
    return len(asked & held) / len(asked) if asked else 0.0


@dataclass
class RerankScript:
    """What the server received, and how it is to answer (`status` other than 200: fail)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    status: int = 200
    shape: str = "cohere"  # or "tei": a bare list of {index, score}
    body: str | None = None  # answered as it is (a broken API)
    # the only fields it takes (an API that answers 422 to any other); None: any
    known: frozenset[str] | None = None

    def reset(self) -> None:
        self.requests.clear()
        self.authorizations.clear()
        self.status = 200
        self.shape = "cohere"
        self.body = None
        self.known = None


def create_rerank_app(script: RerankScript) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "up"}

    @app.post("/v1/rerank")
    async def rerank(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        script.authorizations.append(request.headers.get("authorization", ""))
        if script.body is not None:
            return Response(script.body, media_type="application/json")
        unknown = sorted(set(body) - script.known) if script.known is not None else []
        if unknown:
            return JSONResponse({"detail": f"extra fields not permitted: {unknown}"}, 422)
        if script.status != 200:
            return JSONResponse({"error": "scripted failure"}, status_code=script.status)
        documents = body.get("documents") or []
        scores = [overlap(body["query"], text) for text in documents]
        order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
        order = order[: body.get("top_n") or len(order)]
        if script.shape == "tei":
            return JSONResponse([{"index": i, "score": scores[i]} for i in order])
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        return JSONResponse({"model": body.get("model", ""), "results": results})

    return app
