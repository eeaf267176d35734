"""The typed configuration: one field per rag.properties key, validated at load.

Field names are Python names; each field's alias is its rag.properties key. Defaults are
Datafari's (seed 003) for its keys; the other keys are ours.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


def _key(alias: str, default: object, description: str, **constraints: object) -> object:
    return Field(default, alias=alias, description=description, **constraints)  # type: ignore[call-overload]


class Settings(BaseModel):
    """Everything rag.properties can set; immutable, so a reload swaps the whole object."""

    model_config = ConfigDict(
        populate_by_name=True, frozen=True, extra="forbid", allow_inf_nan=False
    )

    # -- features ------------------------------------------------------------------------
    enable_rag: bool = _key("ai.enable.rag", False, "Enable the /ai/rag endpoint.")
    enable_summarization: bool = _key(
        "ai.enable.summarization", False, "Enable the /ai/summarize endpoint."
    )

    # -- LLM service ---------------------------------------------------------------------
    llm_service: Literal["openai"] = _key(
        "ai.llm.service", "openai", "Type of LLM API: openai (any OpenAI-compatible server)."
    )
    api_endpoint: str = _key(
        "ai.api.endpoint",
        "https://api.openai.com/v1/",
        "Base URL of the OpenAI-compatible API (the part before /chat/completions).",
        min_length=1,
    )
    api_token: SecretStr = _key(
        "ai.api.token", SecretStr(""), "API token sent as a bearer token; never shown."
    )
    llm_model: str = _key(
        "llm.model", "gpt-3.5-turbo", "Model name sent to the LLM API (blank: the API's default)."
    )
    llm_temperature: float = _key(
        "llm.temperature", 0.0, "Randomness of the answers, 0 to 2 (0 recommended).", ge=0, le=2
    )
    llm_max_tokens: int = _key(
        "llm.maxTokens", 200, "Maximum number of tokens in an LLM answer.", ge=1, le=1_000_000
    )
    llm_context_window: int = _key(
        "llm.context.window",
        16385,
        "The model's context window in tokens (counted as 4 characters a token): the OpenAI "
        "endpoint refuses longer prompts and lowers max_tokens to what is left.",
        ge=256,
        le=10_000_000,
    )
    llm_timeout_connect: float = _key(
        "llm.timeout.connect", 5.0, "Seconds to connect to the LLM API.", gt=0, le=600
    )
    llm_timeout_read: float = _key(
        "llm.timeout.read", 120.0, "Seconds to wait for an LLM answer.", gt=0, le=3600
    )
    llm_retries: int = _key(
        "llm.retries",
        2,
        "Retries of an LLM call on connect errors, 429 and 502/503/504.",
        ge=0,
        le=10,
    )

    llm_circuit_failures: int = _key(
        "llm.circuit.failures",
        5,
        "Failed calls in a row (after retries) that open the circuit breaker: calls to that API "
        "then fail at once until llm.circuit.cooldown has passed (0: no breaker).",
        ge=0,
        le=1000,
    )
    llm_circuit_cooldown: float = _key(
        "llm.circuit.cooldown",
        30.0,
        "Seconds an open circuit breaker waits before letting one trial call through.",
        gt=0,
        le=3600,
    )

    llm_max_calls: int = _key(
        "llm.max.calls.per.request",
        16,
        "LLM calls one answer may make in all (rewriting, query expansion, grading, map, reduce "
        "and refine steps): the chains plan their requests within it, leaving out the least "
        "relevant sources when they must; a request that cannot be answered within it gets a "
        "400 before any call.",
        ge=1,
        le=1000,
    )

    # -- requests --------------------------------------------------------------------------
    request_timeout: float = _key(
        "request.timeout",
        300.0,
        "Seconds one answer may take in all (retrieval, every LLM call, streaming included); "
        "past it the request ends with a 504.",
        gt=0,
        le=86400,
    )
    request_max_bytes: int = _key(
        "request.max.bytes",
        5_242_880,
        "Largest request body accepted, in bytes; larger ones get a 413.",
        ge=1024,
        le=1_073_741_824,
    )

    # -- retrieval and chunking ----------------------------------------------------------
    chunking_enable: bool = _key(
        "chunking.enable", True, "Split retrieved documents into chunks before prompting."
    )
    chunk_size: int = _key(
        "chunking.chunk.size",
        3000,
        "Maximum size of a chunk, in characters.",
        ge=50,
        le=1_000_000,
    )
    max_files: int = _key(
        "chunking.maxFiles", 3, "Documents retrieved by the BM25 search.", ge=1, le=100
    )
    rag_operator: Literal["AND", "OR"] = _key(
        "rag.operator", "OR", "Operator between query terms in the BM25 search (q.op)."
    )
    solr_bm25_fields: str = _key(
        "solr.bm25.qf",
        "title content",
        "Fields and boosts of the BM25 search (edismax qf).",
        min_length=1,
    )
    solr_bm25_tie: float = _key(
        "solr.bm25.tie",
        1.0,
        "How much a query word's matches in the other fields add to its best field's score "
        "(edismax tie): 1 sums them, as if title and text were one field; 0 keeps the best.",
        ge=0,
        le=1,
    )

    # -- prompting -----------------------------------------------------------------------
    chunking_strategy: Literal["stuff", "mapreduce", "refine"] = _key(
        "prompt.chunking.strategy",
        "refine",
        "How chunks that do not fit in one request are handled: stuff, mapreduce or refine.",
    )
    max_request_size: int = _key(
        "prompt.max.request.size",
        40000,
        "Maximum size of one LLM request in characters (instructions, sources, query, history).",
        ge=500,
        le=10_000_000,
    )
    max_request_tokens: int = _key(
        "prompt.max.request.tokens",
        0,
        "Optional token budget of one request (0: off), counted as 4 characters per token; "
        "the smaller of the two budgets applies.",
        ge=0,
        le=10_000_000,
    )
    map_concurrency: int = _key(
        "prompt.map.concurrency",
        4,
        "Map requests of map-reduce sent at the same time.",
        ge=1,
        le=64,
    )
    prompts_dir: str = _key(
        "prompt.templates.dir", "prompts", "Folder of the jinja2 prompt templates.", min_length=1
    )

    queries_count: int = _key(
        "rag.queries.count",
        1,
        "Search queries per question (1: the question only): one LLM call writes the others, "
        "all are searched at once and their results fused by reciprocal rank.",
        ge=1,
        le=5,
    )
    grading_enabled: bool = _key(
        "rag.grading.enabled",
        False,
        "Let the LLM grade each retrieved chunk against the question first; chunks below "
        "rag.grading.min are not used.",
    )
    grading_min: Literal["LOW", "MEDIUM", "HIGH"] = _key(
        "rag.grading.min",
        "HIGH",
        "Lowest relevance grade a chunk needs to be used: LOW, MEDIUM or HIGH.",
    )

    # -- conversation --------------------------------------------------------------------
    chat_memory_enabled: bool = _key(
        "chat.memory.enabled", False, "Send the chat history to the LLM with each request."
    )
    query_rewriting_enabled: bool = _key(
        "chat.query.rewriting.enabled", False, "Let the LLM rewrite the search query first."
    )
    history_size: int = _key(
        "chat.memory.history.size", 6, "Messages of history sent to the LLM.", ge=0, le=100
    )

    # -- vector search -------------------------------------------------------------------
    vector_search_enabled: bool = _key(
        "solr.enable.vector.search", False, "Retrieve passages by kNN from VectorMain."
    )
    embeddings_model: str = _key(
        "solr.embeddings.model", "default_model", "Name of the embedding model in Solr's store."
    )
    vector_field: str = _key(
        "solr.vector.field", "vector_384", "DenseVectorField of VectorMain holding the vectors."
    )
    top_k: int = _key("solr.topK", 10, "Passages retrieved by vector search.", ge=1, le=1000)
    retrieval_method: Literal["bm25", "vector", "hybrid"] = _key(
        "retrieval.method",
        "bm25",
        "bm25 (FileShare documents), vector (VectorMain passages by kNN) or hybrid (BM25 and "
        "kNN over VectorMain, fused by reciprocal rank); solr.enable.vector.search=true means "
        "vector unless this says hybrid.",
    )
    rrf_k: int = _key(
        "hybrid.rrf.k", 60, "k of reciprocal rank fusion: 1/(k + rank).", ge=1, le=100_000
    )
    hybrid_bm25_weight: float = _key(
        "hybrid.weight.bm25", 1.0, "Weight of the BM25 ranking in the fusion.", ge=0, le=100
    )
    hybrid_vector_weight: float = _key(
        "hybrid.weight.vector", 1.0, "Weight of the kNN ranking in the fusion.", ge=0, le=100
    )
    embeddings_endpoint: str = _key(
        "ai.embeddings.endpoint",
        "http://127.0.0.1:8001/v1/",
        "Base URL of the OpenAI-compatible embeddings API (before /embeddings).",
        min_length=1,
    )
    embeddings_token: SecretStr = _key(
        "ai.embeddings.token", SecretStr(""), "Bearer token of the embeddings API; never shown."
    )
    embeddings_api_model: str = _key(
        "ai.embeddings.model", "all-MiniLM-L6-v2", "Model name sent to the embeddings API."
    )
    passage_size: int = _key(
        "vector.chunk.size",
        1000,
        "Maximum size of a VectorMain passage, in characters.",
        ge=50,
        le=100_000,
    )
    passage_overlap: int = _key(
        "vector.chunk.overlap",
        100,
        "Characters shared by consecutive passages.",
        ge=0,
        le=10_000,
    )

    # -- Solr ----------------------------------------------------------------------------
    solr_url: str = _key(
        "solr.url", "http://127.0.0.1:8983/solr", "Base URL of Solr (up to /solr).", min_length=1
    )
    documents_collection: str = _key(
        "solr.collection.documents", "FileShare", "Collection of whole documents."
    )
    passages_collection: str = _key(
        "solr.collection.passages", "VectorMain", "Collection of passages (vector search)."
    )
    solr_timeout_connect: float = _key(
        "solr.timeout.connect", 5.0, "Seconds to connect to Solr.", gt=0, le=600
    )
    solr_timeout_read: float = _key(
        "solr.timeout.read", 30.0, "Seconds to wait for a Solr answer.", gt=0, le=3600
    )
    solr_startup_check: bool = _key(
        "solr.startup.check",
        True,
        "At startup, check that Solr's collections and the fields the service uses exist, and "
        "refuse to start with a message naming what is missing.",
    )
    solr_startup_wait: float = _key(
        "solr.startup.wait",
        30.0,
        "Seconds the startup check waits for Solr to answer (it may still be starting).",
        ge=0,
        le=3600,
    )

    # -- security ------------------------------------------------------------------------
    security_enabled: bool = _key(
        "security.enabled",
        False,
        "Document-level security: searches return only documents whose allowed_groups meet "
        "the caller's groups (or that have none), never those whose denied_groups do.",
    )
    security_groups_header: str = _key(
        "security.groups.header",
        "X-User-Groups",
        "Request header with the caller's groups, comma-separated, set by the trusted proxy "
        "in front of the service (which must remove any such header clients send).",
        pattern=r"^[A-Za-z0-9-]{1,64}$",
    )

    security_identity: Literal["header", "jwt"] = _key(
        "security.identity",
        "header",
        "Where the caller's groups come from: header (security.groups.header, set by a trusted "
        "proxy) or jwt (a signed token in `Authorization: Bearer`, verified with "
        "security.jwt.key; its security.jwt.groups.claim lists the groups).",
    )
    jwt_key: SecretStr = _key(
        "security.jwt.key",
        SecretStr(""),
        "Key that verifies identity tokens: a PEM public key (RS256/ES256) or an HS256 shared "
        "secret.",
    )
    jwt_algorithms: str = _key(
        "security.jwt.algorithms",
        "RS256",
        "Signature algorithms accepted, comma-separated (never mix HS* with public keys).",
        pattern=r"^\s*(HS|RS|ES|PS)(256|384|512)\s*(,\s*(HS|RS|ES|PS)(256|384|512)\s*)*$",
    )
    jwt_groups_claim: str = _key(
        "security.jwt.groups.claim", "groups", "Claim of the token holding the groups (a list)."
    )
    jwt_audience: str = _key(
        "security.jwt.audience", "", "Required `aud` of identity tokens (empty: not checked)."
    )
    jwt_issuer: str = _key(
        "security.jwt.issuer", "", "Required `iss` of identity tokens (empty: not checked)."
    )

    # -- access ----------------------------------------------------------------------------
    api_keys: SecretStr = _key(
        "api.keys",
        SecretStr(""),
        "API keys the public endpoints (/ai/*, /v1/*, /search/*) require, comma-separated, sent "
        "as `Authorization: Bearer <key>` or `X-API-Key: <key>`; empty: no key needed.",
    )

    cors_origins: str = _key(
        "cors.allowed.origins",
        "",
        "Origins of search pages that embed the chat widget from another host, comma-separated "
        "(https://search.example.org); read at startup. Empty: same origin only.",
    )

    openai_passthrough: bool = _key(
        "openai.passthrough.enabled",
        False,
        "Let /v1/chat/completions relay requests that do no retrieval (no index_name, tools or "
        "functions, other roles, non-text content) to the LLM as they are. Off: such requests "
        "get a 400, so callers cannot use the LLM through the service for anything else.",
    )

    # -- administration ------------------------------------------------------------------
    admin_token: SecretStr = _key(
        "admin.token", SecretStr(""), "Bearer token of the admin API (ADMIN_TOKEN env wins)."
    )

    def overridden(self, **changes: object) -> Settings:
        """A copy with `changes` (by field name), validated like values read from the file."""
        return type(self).model_validate({**self.model_dump(), **changes})

    @property
    def retrieval(self) -> Literal["bm25", "vector", "hybrid"]:
        """The retrieval in force (Datafari's switch and ours agree on this)."""
        if self.retrieval_method == "hybrid":
            return "hybrid"
        if self.vector_search_enabled or self.retrieval_method == "vector":
            return "vector"
        return "bm25"

    @model_validator(mode="after")
    def _jwt_identity_needs_a_key(self) -> Settings:
        if self.security_enabled and self.security_identity == "jwt" and not self.jwt_key:
            raise ValueError(
                "security.identity=jwt needs security.jwt.key (without it no caller could be "
                "identified and every request would fail)"
            )
        return self

    @field_validator("api_endpoint", "solr_url", "embeddings_endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("llm_model", "embeddings_model", "vector_field", "prompts_dir")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


CHARS_PER_TOKEN = 4  # a documented estimate: English text averages about 4 characters a token


def request_budget(settings: Settings) -> int:
    """Characters one LLM request may hold: prompt.max.request.size, or less with a token cap."""
    if settings.max_request_tokens:
        return min(settings.max_request_size, settings.max_request_tokens * CHARS_PER_TOKEN)
    return settings.max_request_size


def answer_reserve(settings: Settings) -> int:
    """Characters to keep free for an earlier answer carried into a request (refine)."""
    return settings.llm_max_tokens * CHARS_PER_TOKEN


def known_keys() -> dict[str, str]:
    """rag.properties key -> field name."""
    return {field.alias or name: name for name, field in Settings.model_fields.items()}
