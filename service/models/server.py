"""The local model server: an OpenAI-compatible API that runs offline, in its own process.

    GET  /v1/models             the models served
    POST /v1/chat/completions   model "extractive" (see service.models.extractive)
    POST /v1/embeddings         models "all-MiniLM-L6-v2" (the default), "bge-small-en-v1.5"
                                (see service.models.encoder) and "multilingual-e5-small"
                                (service.models.multilingual)
    POST /v1/rerank             model "ms-marco-MiniLM-L-12-v2", a cross-encoder (Cohere's
                                shape; see service.models.reranker)

It shares no code with the service: the service talks to it over HTTP, exactly as it would
talk to OpenAI, vLLM, Ollama or llama.cpp.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio.to_thread
import numpy as np
import orjson
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.requests import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.models import extractive, reranker
from service.models.batching import MicroBatcher
from service.models.encoder import DEFAULT_MODEL, MODELS, Encoder, load_encoder
from service.models.local import EXTRACTIVE_MODEL
from service.models.pinned import ModelMissing

EMBEDDING_MODEL = DEFAULT_MODEL
# Datafari's solr.embeddings.model default names the default model too
DEFAULT_ALIASES = frozenset({"default_model", ""})


def embedding_model_of(name: str) -> str | None:
    """The served model `name` means (`sentence-transformers/all-MiniLM-L6-v2`,
    `BAAI/bge-small-en-v1.5`: the hub's names too), or None."""
    if name in DEFAULT_ALIASES:
        return DEFAULT_MODEL
    wanted = name.rsplit("/", 1)[-1].lower()
    return next((model for model in MODELS if model.lower() == wanted), None)


MAX_EMBEDDING_BATCH = 2048
MAX_RERANK_QUERY_CHARS = 4_000
MAX_CHARS_PER_TOKEN = 8  # a cut of N tokens reads at most 8N characters of a text
CREATED = int(time.time())


def _refuse_non_text(text: str) -> None:
    """A lone UTF-16 surrogate (`"\\ud800"`) is valid JSON but no text: neither the tokenizer
    nor a JSON answer quoting it could carry it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a text holds a lone UTF-16 surrogate, not text") from None


BATCH_TEXTS = 8  # concurrent requests' texts encoded together (MicroBatcher)


class Message(BaseModel):
    """One chat message, as OpenAI clients send it."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _text_only(self) -> Message:
        _refuse_non_text(self.text())
        return self

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(str(part.get("text", "")) for part in self.content)
        return self.content or ""


class EmbeddingsRequest(BaseModel):
    """The body of POST /v1/embeddings."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    input: str | list[str] = Field(description="One text or a batch of texts.")
    encoding_format: str | None = None

    @field_validator("input")
    @classmethod
    def _text(cls, value: str | list[str]) -> str | list[str]:
        for text in [value] if isinstance(value, str) else value:
            _refuse_non_text(text)
        return value


class ChatRequest(BaseModel):
    """The body of POST /v1/chat/completions."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    stream: bool = False


class RerankRequest(BaseModel):
    """The body of POST /v1/rerank (Cohere's shape: Jina, vLLM and Infinity share it)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    query: str = Field(min_length=1, max_length=MAX_RERANK_QUERY_CHARS)
    documents: list[str] = Field(min_length=1, max_length=reranker.MAX_PAIRS)
    top_n: int | None = Field(None, ge=1)
    # Cohere v2's name: each (query, document) pair is cut to this many tokens
    max_tokens_per_doc: int = Field(reranker.MAX_TOKENS, ge=16, le=reranker.MAX_TOKENS)
    # ours: a document longer than the cut cut at its end, or to its sentences nearest the
    # query (service.models.nearest)
    passage_cut: Literal["end", "nearest"] = "end"


def _openai_error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": None}}, status_code=status
    )


async def _stream(
    completion_id: str, model: str, text: str, usage: dict[str, int], finish: str = "stop"
) -> AsyncIterator[str]:
    """OpenAI's chunk stream: the role, the text a word at a time, the end, the usage."""

    def event(choices: list[dict[str, object]], **extra: object) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    def delta(content: dict[str, str], finish: str | None = None) -> str:
        return event([{"index": 0, "delta": content, "finish_reason": finish}])

    yield delta({"role": "assistant", "content": ""})
    for word in re.findall(r"\S+\s*", text):
        yield delta({"content": word})
        await asyncio.sleep(0)
    yield delta({}, finish)
    yield event([], usage=usage)
    yield "data: [DONE]\n\n"


def create_model_app(*, embeddings: bool = True) -> FastAPI:
    """The app; `embeddings=False` serves chat only (no model weights loaded)."""
    app = FastAPI(title="solr-rag local model server", version="1")
    # the default model is loaded at start (a missing file stops the server at once); another
    # on its first request
    encoders: dict[str, Encoder] = {DEFAULT_MODEL: load_encoder()} if embeddings else {}
    lock = threading.Lock()  # onnxruntime already uses every core: one batch at a time

    def encoder_for(model: str) -> Encoder:
        with lock:
            if model not in encoders:
                encoders[model] = load_encoder(model)
            return encoders[model]

    # at most 8 texts a batch: on 2 cores 2-8 gave 1.4x the throughput of one text at a
    # time at 50 clients, 16 less, 64 less than none (bench/RESULTS.md, bench.embed_load)
    batchers: dict[str, MicroBatcher] = {}

    def batcher_for(model: str) -> MicroBatcher:
        """One micro-batcher a model: concurrent requests are encoded together."""
        if model not in batchers:

            def run(texts: list[str]) -> tuple[np.ndarray, list[int]]:
                encoder = encoder_for(model)
                with lock:
                    return encoder.encode(texts), [encoder.token_count(t) for t in texts]

            batchers[model] = MicroBatcher(run, max_texts=BATCH_TEXTS)
        return batchers[model]

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return _openai_error(400, f"invalid request: {error.errors()[:3]}", "invalid_request_error")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "up"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        served = [EXTRACTIVE_MODEL] + (list(MODELS) if encoders else [])
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": CREATED, "owned_by": "solr-rag"}
                for name in served
            ],
        }

    @app.post("/v1/embeddings", response_model=None)
    async def embed(request: EmbeddingsRequest) -> Response:
        model = embedding_model_of(request.model or "")
        if not encoders or model is None:
            names = " or ".join(repr(name) for name in MODELS)
            return _openai_error(
                404, f"model {request.model!r} is not served here; use {names}", "not_found"
            )
        texts = [request.input] if isinstance(request.input, str) else request.input
        if len(texts) > MAX_EMBEDDING_BATCH:
            return _openai_error(
                400, f"at most {MAX_EMBEDDING_BATCH} texts per request", "invalid_request_error"
            )

        try:
            vectors, counts = await batcher_for(model).encode(texts)
        except ModelMissing as error:
            return _openai_error(503, str(error), "unavailable")
        tokens = sum(counts)
        body = {
            "object": "list",
            "model": model,
            "data": [
                {"object": "embedding", "index": i, "embedding": vector}
                for i, vector in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        # orjson writes each float32 in the fewest digits that give it back exactly: half the
        # bytes of Python's float64 digits, 15x faster (FastAPI's own encoder visits each float)
        return Response(
            orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json"
        )

    # one cross-encoder, loaded on the first request (whatever cut a request asks: a session
    # per cut would let callers make the server hold as many)
    rerankers: list[reranker.CrossEncoder] = []

    @app.post("/v1/rerank", response_model=None)
    async def rerank(request: RerankRequest) -> dict[str, Any] | JSONResponse:
        if (request.model or reranker.RERANKER) != reranker.RERANKER:
            return _openai_error(
                404,
                f"model {request.model!r} is not served here; use {reranker.RERANKER!r}",
                "not_found",
            )
        tokens = request.max_tokens_per_doc
        # a document's tokens past the cut cost their tokenizing all the same: no more
        # characters than the cut can use are read
        # (the nearest sentences may be anywhere in what the longest cut reads)
        nearest = request.passage_cut == "nearest"
        read = (reranker.MAX_TOKENS if nearest else tokens) * MAX_CHARS_PER_TOKEN
        documents = [d[:read] for d in request.documents]
        query = request.query[: tokens * MAX_CHARS_PER_TOKEN]

        def scored() -> reranker.Scored:
            with lock:  # one batch at a time (and the cut is the tokenizer's state)
                if not rerankers:
                    rerankers.append(reranker.CrossEncoder())
                return rerankers[0].scores(query, documents, tokens, nearest=nearest)

        try:
            found = await anyio.to_thread.run_sync(scored)
        except reranker.RerankerMissing as error:
            return _openai_error(503, str(error), "unavailable")
        scores = found.scores
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[: request.top_n]
        return {
            "id": f"rerank-{uuid.uuid4().hex}",
            "model": reranker.RERANKER,
            "results": [{"index": i, "relevance_score": scores[i]} for i in order],
            "usage": {"total_tokens": found.tokens},
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: ChatRequest) -> dict[str, Any] | JSONResponse:
        model = request.model or EXTRACTIVE_MODEL
        if model != EXTRACTIVE_MODEL:
            return _openai_error(
                404, f"model {model!r} is not served here; use {EXTRACTIVE_MODEL!r}", "not_found"
            )
        users = [m for m in request.messages if m.role == "user"]
        prompt = users[-1].text() if users else request.messages[-1].text()
        text, finish = extractive.answer_and_finish(prompt, max_words=request.max_tokens or 200)
        prompt_words = sum(len(m.text().split()) for m in request.messages)
        # Whitespace-separated words, not model tokens: this answerer has no tokenizer.
        usage = {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
        }
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if request.stream:
            return StreamingResponse(
                _stream(completion_id, model, text, usage, finish),
                media_type="text/event-stream",
            )
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
        }

    return app
