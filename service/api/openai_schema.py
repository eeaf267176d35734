"""OpenAI's chat shapes, as this service speaks them, for /openapi.json.

The router reads the request body itself (KAITO's rules answer malformed chat requests in
their own words), so the request model documents rather than validates; `add_schemas` puts
the models no route declares into the document's components.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from service.api.grounding import GroundingOut
from service.api.sources import SourceOut

REF = "#/components/schemas/{model}"


class ChatMessageIn(BaseModel):
    """A message of the conversation: system, developer, user or assistant (another role, or
    content that is not text, is for the LLM as it is)."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions: OpenAI's request, plus KAITO's `index_name`,
    `similarity_threshold` and `context_token_ratio`."""

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessageIn] = Field(
        min_length=1,
        description="The conversation; the user messages after the last assistant message "
        "are the question, the rest is history.",
    )
    model: str | None = Field(
        None,
        description="rag, rag-bm25, rag-vector or rag-hybrid: answers from the index; another "
        "name: the LLM model that answers (relayed as it is with openai.passthrough.enabled).",
    )
    index_name: str | None = Field(
        None,
        description="KAITO's choice of index: FileShare, VectorMain, rag, bm25, vector, hybrid; "
        '"" for the LLM without retrieval. Absent: openai.default.index.',
    )
    similarity_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="KAITO's relevance floor for this request: passages whose cosine similarity "
        "to the question is below it are not used (vector, hybrid). Absent: "
        "retrieval.similarity.min.",
    )
    context_token_ratio: float | None = Field(
        None,
        ge=0.2,
        le=0.8,
        description="KAITO's share of the free context window (after the conversation and 150 "
        "tokens of instructions) the sources may take; max_tokens defaults to the rest. Absent: "
        "openai.context.token.ratio.",
    )
    stream: bool = False
    stream_options: dict[str, Any] | None = Field(
        None, description="include_usage: true adds a last chunk with the usage."
    )
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = Field(
        None, description="Up to 4 sequences; the answer ends before the first."
    )
    response_format: dict[str, Any] | None = Field(
        None,
        description="text, json_object or json_schema: the answer is checked to be JSON (and "
        "to match the schema), else a 400.",
    )
    n: int | None = Field(None, description="1 only: other values are refused (400).")
    logprobs: bool | None = Field(None, description="Refused (400) when true.")
    tools: list[dict[str, Any]] | None = Field(
        None, description="Relayed to the LLM (openai.passthrough.enabled); a rag* model: 400."
    )


class AssistantMessage(BaseModel):
    """The answer."""

    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    """The one choice of an answer."""

    index: int
    message: AssistantMessage
    finish_reason: str = Field(description="stop, or length when max_tokens cut the answer.")


class CompletionUsage(BaseModel):
    """Tokens the answer cost, over every LLM call it made."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """OpenAI's chat.completion, with the sources two ways: `sources` and `citations`."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    sources: list[SourceOut]
    citations: list[str] = Field(description="The sources' URLs (or ids), in citation order.")
    grounding: GroundingOut | None = Field(
        None, description="Each sentence checked against its sources (grounding.enabled only)."
    )
    cached: bool | None = Field(None, description="true for an answer from the answer cache.")
    cache_age: float | None = Field(None, description="Seconds since a cached answer was made.")


class ChatCompletionChunk(BaseModel):
    """One Server-Sent Event of a streamed answer (`data: {...}`); the last one before
    `data: [DONE]` has the finish_reason, usage, sources, citations (and grounding)."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[dict[str, Any]]


class Model(BaseModel):
    """A model a request may name."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """GET /v1/models."""

    object: Literal["list"] = "list"
    data: list[Model]


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """A route's documented JSON body, by reference to a component `add_schemas` adds."""
    return {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}},
    }


def add_schemas(document: dict[str, Any], *more: type[BaseModel]) -> None:
    """Puts the models routes refer to by hand into `components.schemas` (the chat request's,
    and `more`: bodies validated off the event loop)."""
    models = [ChatCompletionRequest, ChatCompletionChunk, *more]
    _, definitions = models_json_schema(
        [(model, "validation") for model in models], ref_template=REF
    )
    document.setdefault("components", {}).setdefault("schemas", {}).update(
        definitions.get("$defs", {})
    )
