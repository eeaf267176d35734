"""The typed configuration: rag.properties keys grouped into parts, validated at load.

Each part is one concern (the LLM, the embeddings API, Solr, retrieval, prompting, the chat,
security, the server) and each stage is handed the part it needs, not the whole file. A
field's alias is its rag.properties key; the file stays flat (Datafari's keys, ours beside
them), and `Settings.of(mapping)` sorts its keys into the parts. Defaults are Datafari's
(seed 003) for its keys; the other keys are ours.

    >>> settings = Settings.of({"llm.model": "gpt-4o-mini", "chunking.maxFiles": "5"})
    >>> settings.llm.model, settings.retrieval.max_files
    ('gpt-4o-mini', 5)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from service.config.field_map import FieldMap, parse_fields
from service.config.tls import TlsFiles, tls_context
from service.config.tool_names import TOOL_NAMES
from service.text.tokens import ENCODINGS, TokenCounter, checked_soon, token_counter

# the retrieval methods: the one list every part of the service reads
Retrieval = Literal["bm25", "vector", "hybrid"]
RerankOrder = Literal["reranker", "blend"]
RerankCut = Literal["end", "nearest"]
RETRIEVAL_METHODS: tuple[Retrieval, ...] = get_args(Retrieval)
# ZooKeeper's connect string: host:port pairs, then an optional chroot; empty: none
ZK_HOSTS = r"^$|^[A-Za-z0-9.\-]+:[0-9]{1,5}(,[A-Za-z0-9.\-]+:[0-9]{1,5})*(/[A-Za-z0-9_.\-/]*)?$"
# solr.embeddings.model values that name no model (Datafari's default names Solr's model store)
UNNAMED_MODELS = frozenset({"", "default_model"})


def _key(alias: str, default: object, description: str, **constraints: object) -> Any:
    return Field(default, alias=alias, description=description, **constraints)  # type: ignore[call-overload]


NOWHERE: tuple[str, ...] = ()  # a secret's sent_to when the service only checks it
# the keys that decide which Solr nodes are called (and so receive Solr's login): solr.url's
# nodes, the live nodes their cluster names (solr.nodes.discover), or those the ZooKeeper of
# solr.zk.hosts names
SOLR_NODES = ("solr.url", "solr.zk.hosts", "solr.nodes.discover")


def _secret(alias: str, description: str, *, sent_to: tuple[str, ...]) -> Any:
    """A secret key: never shown; `sent_to` names every key that decides the addresses it is
    sent to (NOWHERE: it is only checked), so a change of any of them must give it again."""
    return Field(
        SecretStr(""),
        alias=alias,
        description=description,
        json_schema_extra={"sent_to": list(sent_to)},
    )


def secret_destinations() -> dict[str, tuple[str, ...]]:
    """Each secret key and the keys that decide where it is sent (NOWHERE: nowhere)."""
    found = {}
    for part in Settings.model_fields.values():
        model = part.annotation
        for field in model.model_fields.values():  # type: ignore[union-attr]
            if field.annotation is SecretStr:
                extra = field.json_schema_extra
                if not isinstance(extra, dict) or "sent_to" not in extra:
                    raise TypeError(f"{field.alias}: a secret declared without _secret(sent_to=)")
                found[str(field.alias)] = tuple(str(key) for key in extra["sent_to"])
    return found


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
MAX_SOLR_URLS = 16


def _http_urls(value: str) -> str:
    """One base URL or several, comma-separated (SolrCloud nodes), each http(s)://."""
    urls = [url.strip() for url in value.split(",") if url.strip()]
    if not urls:
        raise ValueError("must name at least one URL")
    if len(urls) > MAX_SOLR_URLS:
        raise ValueError(
            f"lists {len(urls)} URLs; at most {MAX_SOLR_URLS} (the others are learned from "
            "the cluster)"
        )
    for position, url in enumerate(urls, start=1):
        try:
            _http_url(url)
        except ValueError as error:
            raise ValueError(f"URL {position} {error}") from None
    return ",".join(urls)


HttpUrls = Annotated[str, AfterValidator(_http_urls)]
# what no header may carry: a line break would smuggle a header of its own
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Solr's rule for collection names: letters, digits, . _ - (not first); they go in URL paths
COLLECTION_NAME = r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,99}$"
_FIELD_NAME = re.compile(r"^[A-Za-z_][\w.-]{0,199}$")  # a field, in a query's local params


def _sendable(value: SecretStr) -> SecretStr:
    """A secret that goes into a header (a token, a password, a key): no control character
    nor line break, which no HTTP client sends (every request would fail, naming the endpoint,
    not the secret)."""
    if _CONTROL.search(value.get_secret_value()):
        raise ValueError("holds a control character or a line break (never sent)")
    return value


class Part(BaseModel):
    """A group of rag.properties keys: immutable, validated like the file's values."""

    model_config = ConfigDict(
        populate_by_name=True, frozen=True, extra="forbid", allow_inf_nan=False
    )


class ServerSettings(Part):
    """Which endpoints are on, and what one request may cost."""

    enable_rag: bool = _key("ai.enable.rag", False, "Enable the /ai/rag endpoint.")
    datafari_api_version: Literal["6.2", "7"] = _key(
        "datafari.api.version",
        "6.2",
        "What /Datafari/rest/v2.0/ai/rag and .../ai/summarize answer: 6.2 (the RagAPI, "
        "Datafari 6.2's front-ends) or 7 (Datafari 7's compatibility routes: /ai's body and "
        "envelope, as its AiPowered answers them). /ai, /ai/stream and /ai/agentic are 7's "
        "whatever this says.",
    )
    enable_summarization: bool = _key(
        "ai.enable.summarization", False, "Enable the /ai/summarize endpoint."
    )
    request_timeout: float = _key(
        "request.timeout",
        300.0,
        "Seconds one answer may take in all (retrieval, every LLM call, streaming included); "
        "past it the request ends with a 504.",
        gt=0,
        le=86400,
    )
    body_timeout: float = _key(
        "request.body.timeout",
        30.0,
        "Seconds a request body may pause between two of its parts; a body that stops "
        "arriving gets a 408 and frees its connection (a slow sender cannot hold workers).",
        gt=0,
        le=3600,
    )
    request_max_bytes: int = _key(
        "request.max.bytes",
        5_242_880,
        "Largest request body accepted, in bytes; larger ones get a 413.",
        ge=1024,
        le=1_073_741_824,
    )
    cors_origins: str = _key(
        "cors.allowed.origins",
        "",
        "Origins of search pages that embed the chat widget from another host, comma-separated "
        "(https://search.example.org); read at startup. Empty: same origin only.",
    )
    ws_max_per_caller: int = _key(
        "ws.max.per.caller",
        16,
        "WebSockets (/ai/ws) one caller may hold open at once in each worker: the person, "
        "else the API key from one address, else the address; more are closed at once with "
        "1013 (try again later). 0: no limit but ws.max.total.",
        ge=0,
        le=100_000,
    )
    ws_max_total: int = _key(
        "ws.max.total",
        0,
        "WebSockets (/ai/ws) each worker holds open at once, all callers together; more are "
        "closed at once with 1013 (try again later). 0: half the process's open-file limit "
        "(ulimit -n); never more than that limit less 128 (what Solr, the LLM and HTTP "
        "clients need).",
        ge=0,
        le=1_000_000,
    )


class OpenAISettings(Part):
    """How /v1/chat/completions turns an OpenAI chat request into a RAG request (KAITO's
    rules), and what it relays to the LLM as it is."""

    passthrough: bool = _key(
        "openai.passthrough.enabled",
        False,
        "Let /v1/chat/completions relay requests that do no retrieval (tools or functions, other "
        'roles, non-text content, index_name "", or a model other than the rag* ones) to the '
        "LLM as they are. Off: tools, roles and content the RAG answer cannot take get a 400, "
        "and every other request is answered from the index, so callers cannot use the LLM "
        "through the service for anything else.",
    )
    default_index: Literal["", "rag", "FileShare", "VectorMain", Retrieval] = _key(
        "openai.default.index",
        "rag",
        "The index /v1/chat/completions answers from when a request names none (no "
        "index_name, no rag* model): rag (the configured retrieval.method), FileShare, "
        "VectorMain, bm25, vector or hybrid; empty: such requests go to the LLM as they "
        "are (KAITO's rule; needs openai.passthrough.enabled).",
    )
    no_context: Literal["refuse", "answer", "error"] = _key(
        "openai.no.context",
        "refuse",
        "/v1/chat/completions when the search finds nothing relevant: refuse (a completion "
        "saying the documents do not hold the answer, with `abstained`: never an answer from "
        "the LLM's memory), answer (the LLM answers the conversation without sources, as "
        "KAITO does) or error (a 428 NoFileFound, as /ai/rag).",
    )
    context_ratio: float = _key(
        "openai.context.token.ratio",
        0.5,
        "/v1/chat/completions: the share of the context window left after the conversation "
        "(and 150 tokens for the instructions) that the sources may take; the answer's "
        "max_tokens defaults to the rest (KAITO's context_token_ratio; a request may send "
        "its own).",
        ge=0.2,
        le=0.8,
    )
    dynamic_top_k: bool = _key(
        "openai.dynamic.topk",
        False,
        "/v1/chat/completions, KAITO's dynamic top-k: vector and hybrid search fetch at least "
        "100 passages (one per 500 tokens the window leaves, when more), the similarity floor "
        "drops the far ones, and one request takes the most relevant that fit its share of "
        "the window (the stuff strategy).",
    )
    sources_inline: Literal["rag-models", "always", "never"] = _key(
        "openai.sources.inline",
        "rag-models",
        "Whether /v1/chat/completions answers end with a Sources list (titles and links) "
        "inside the message, for clients that drop the sources and citations fields: "
        "rag-models (when the request names a rag* model), always, or never.",
    )


class LLMSettings(Part):
    """The OpenAI-compatible chat API: where, which model, how long to wait, how often."""

    service: Literal["openai"] = _key(
        "ai.llm.service", "openai", "Type of LLM API: openai (any OpenAI-compatible server)."
    )
    endpoint: HttpUrl = _key(
        "ai.api.endpoint",
        "https://api.openai.com/v1/",
        "Base URL of the OpenAI-compatible API (the part before /chat/completions).",
        min_length=1,
    )
    token: SecretStr = _secret(
        "ai.api.token",
        "API token sent as a bearer token; never shown.",
        sent_to=("ai.api.endpoint",),
    )
    _token_sendable = field_validator("token")(_sendable)
    model: str = _key(
        "llm.model", "gpt-3.5-turbo", "Model name sent to the LLM API (blank: the API's default)."
    )
    temperature: float = _key(
        "llm.temperature", 0.0, "Randomness of the answers, 0 to 2 (0 recommended).", ge=0, le=2
    )
    max_tokens: int = _key(
        "llm.maxTokens", 200, "Maximum number of tokens in an LLM answer.", ge=1, le=1_000_000
    )
    logprobs: bool = _key(
        "llm.logprobs",
        True,
        "Ask the LLM for its answer's token probabilities (OpenAI's logprobs, top 5): the "
        "answer's `confidence`, and grounding.abstain.not.found. false: for an LLM that "
        "refuses the field.",
    )
    context_window: int = _key(
        "llm.context.window",
        16385,
        "The model's context window in tokens (counted by llm.tokenizer): the OpenAI endpoint "
        "refuses longer prompts and lowers max_tokens to what is left.",
        ge=256,
        le=10_000_000,
    )
    tokenizer: str = _key(
        "llm.tokenizer",
        "auto",
        "How tokens are counted (context window, max_tokens, prompt.max.request.tokens): auto "
        "(the model's own encoding for OpenAI models, cl100k_base or o200k_base, shipped in "
        "bpe-openai; 4 characters a token for other models), an encoding name, the path of the "
        "local model's tokenizer.json, or chars (4 characters a token).",
        min_length=1,
    )
    timeout_connect: float = _key(
        "llm.timeout.connect", 5.0, "Seconds to connect to the LLM API.", gt=0, le=600
    )
    timeout_read: float = _key(
        "llm.timeout.read", 120.0, "Seconds to wait for an LLM answer.", gt=0, le=3600
    )
    retries: int = _key(
        "llm.retries",
        2,
        "Retries of an LLM call on connect errors, 429 and 502/503/504.",
        ge=0,
        le=10,
    )
    circuit_failures: int = _key(
        "llm.circuit.failures",
        5,
        "Failed calls in a row (after retries) that open the circuit breaker: calls to that API "
        "then fail at once until llm.circuit.cooldown has passed (0: no breaker). A timeout "
        "while the LLM had other calls to serve (a queue) is no failure.",
        ge=0,
        le=1000,
    )
    circuit_cooldown: float = _key(
        "llm.circuit.cooldown",
        30.0,
        "Seconds an open circuit breaker waits before letting one trial call through.",
        gt=0,
        le=3600,
    )
    admission: Literal["auto", "on", "off"] = _key(
        "llm.admission",
        "auto",
        "Whether a question is refused at once (503, Retry-After) when the LLM already has "
        "more in progress than it can answer within request.timeout: this worker's questions, "
        "or the queue the LLM server reports (/metrics of llama.cpp, vLLM, SGLang; llama.cpp's "
        "/slots), at the pace it has been answering (at most 2 before that pace is known): "
        "on, off, or auto (on for the service's own local models, whose one CPU-bound "
        "server queues what it cannot answer yet).",
    )
    max_concurrent_per_caller: int = _key(
        "llm.max.concurrent.per.caller",
        32,
        "Questions one caller may have in progress at once in each worker (/ai/rag, "
        "/ai/summarize, /v1/chat/completions; a stream counts until it ends); more get a 429 "
        "with Retry-After. The caller is its API key, else its JWT subject, else its address: "
        "behind a proxy that hides addresses, give callers keys or JWTs, or raise it. 0: no "
        "limit.",
        ge=0,
        le=100_000,
    )
    max_calls: int = _key(
        "llm.max.calls.per.request",
        16,
        "LLM calls one answer may make in all (rewriting, query expansion, grading, map, reduce "
        "and refine steps): the chains plan their requests within it, leaving out the least "
        "relevant sources when they must; a request that cannot be answered within it gets a "
        "400 before any call.",
        ge=1,
        le=1000,
    )

    @field_validator("model")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        value = value.strip()
        if value not in ("auto", "chars") and value not in ENCODINGS:
            # a tokenizer.json: read now, so a bad path stops here (on the event loop, a
            # settings reload, only looked at: the first question reads it in a thread)
            checked_soon(value)
        return value


# a model of the e5 family (intfloat/multilingual-e5-small, e5-base-v2...): trained with
# "query: " and "passage: " before its texts
E5_MODEL = re.compile(r"(?:^|[/_-])(?:multilingual-)?e5(?:[_-]|$)", re.IGNORECASE)


class EmbeddingsSettings(Part):
    """The OpenAI-compatible embeddings API, and how passages are cut for it."""

    endpoint: HttpUrl = _key(
        "ai.embeddings.endpoint",
        "http://127.0.0.1:8001/v1/",
        "Base URL of the OpenAI-compatible embeddings API (before /embeddings).",
        min_length=1,
    )
    token: SecretStr = _secret(
        "ai.embeddings.token",
        "Bearer token of the embeddings API; never shown.",
        sent_to=("ai.embeddings.endpoint",),
    )
    _token_sendable = field_validator("token")(_sendable)
    model: str = _key(
        "ai.embeddings.model", "all-MiniLM-L6-v2", "Model name sent to the embeddings API."
    )
    languages: str = _key(
        "ai.embeddings.languages",
        "auto",
        "The languages the embedding model reads, comma-separated (en, fr), or * for any; "
        "auto: any for a multilingual model (its name holds multilingual, m3 or labse), en "
        "otherwise. A question in another language leans on BM25 in hybrid "
        "(hybrid.weight.vector.foreign).",
        max_length=200,
    )
    query_prefix: str = _key(
        "ai.embeddings.query.prefix",
        "auto",
        "Word put before a question or a search's text (and a space) when it is embedded; "
        "auto: query: for an e5 model (its name holds e5, as multilingual-e5-small), nothing "
        "otherwise; none: nothing.",
        max_length=100,
    )
    passage_prefix: str = _key(
        "ai.embeddings.passage.prefix",
        "auto",
        "Word put before a passage (and a space) when it is embedded; auto: passage: for an "
        "e5 model, nothing otherwise; none: nothing.",
        max_length=100,
    )
    passage_size: int = _key(
        "vector.chunk.size",
        1000,
        "Maximum size of a VectorMain passage, in characters. multilingual-e5-small reads a "
        "passage's first 2,048: on long French pages, 3,000-character passages rank 0.15 "
        "nDCG@10 below 1,000-character ones (bench/RESULTS.md).",
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

    def reads(self, model: str | None = None) -> frozenset[str] | None:
        """The languages the embedding model reads (ai.embeddings.languages, auto resolved
        for `model`); None: any."""
        value = self.languages.strip().lower()
        if value == "auto":
            multilingual = re.search(r"multilingual|\bm3\b|-m3|labse", model or self.model, re.I)
            return None if multilingual else frozenset({"en"})
        if value in ("*", "any", ""):
            return None
        return frozenset(part.strip() for part in value.split(",") if part.strip())

    def prefixes(self, model: str | None = None) -> tuple[str, str]:
        """(the query's prefix, the passage's), each with its space, for `model`
        (ai.embeddings.model by default), `auto` resolved."""
        e5 = E5_MODEL.search(model or self.model) is not None

        def prefix(value: str, e5_word: str) -> str:
            word = (e5_word if e5 else "") if value == "auto" else value
            return "" if word in ("", "none") else f"{word} "

        return prefix(self.query_prefix, "query:"), prefix(self.passage_prefix, "passage:")


class SolrSettings(Part):
    """Where Solr is, its collections, the vector field, and how long to wait for it."""

    url: HttpUrls = _key(
        "solr.url",
        "http://127.0.0.1:8983/solr",
        "Base URL of Solr (up to /solr); for SolrCloud, several nodes' URLs may be listed, "
        "comma-separated: requests go to each in turn, and to another when one is down.",
        min_length=1,
        max_length=4096,
    )
    discover_nodes: bool = _key(
        "solr.nodes.discover",
        True,
        "In SolrCloud, also send requests to the cluster's other live nodes (learned every "
        "30 s), when solr.url names nodes of the cluster (not a proxy or load balancer in front "
        "of it). Turn off when the nodes' own names are not reachable from the service (NAT): "
        "then only solr.url's nodes are used.",
    )
    zk_hosts: str = _key(
        "solr.zk.hosts",
        "",
        "SolrCloud's ZooKeeper (zk1:2181,zk2:2181, with its /chroot if any): the live nodes are "
        "read there every 30 s, so the service finds the cluster even when every node solr.url "
        "names is down (solr.url's nodes are asked when ZooKeeper cannot be). Empty: the live "
        "nodes are asked of solr.url's nodes.",
        pattern=ZK_HOSTS,
    )
    documents_collection: str = _key(
        "solr.collection.documents",
        "FileShare",
        "Collection of whole documents.",
        pattern=COLLECTION_NAME,
    )
    passages_collection: str = _key(
        "solr.collection.passages",
        "VectorMain",
        "Collection of passages (vector search).",
        pattern=COLLECTION_NAME,
    )
    cache_collection: str = _key(
        "solr.collection.cache",
        "AnswerCache",
        "Collection of cached answers (cache.enabled).",
        pattern=COLLECTION_NAME,
    )
    vector_field: str = _key(
        "solr.vector.field", "vector_384", "DenseVectorField of VectorMain holding the vectors."
    )
    documents_fields: str = _key(
        "solr.documents.fields",
        "",
        "Which fields of the documents collection hold what the service reads, when they are "
        "not our configset's: role=field, comma-separated (roles: id, title, content, url, "
        "language, modified; e.g. title=name_s,content=body_t,url=link_s). Several fields "
        "separated by | are tried in order; {lang} in a name is the request's lang, else the "
        "document's language (content=content_{lang}|content). Roles not named keep our "
        "configset's field (id, title, content, url, language, last_modified).",
        max_length=2000,
    )
    passages_fields: str = _key(
        "solr.passages.fields",
        "",
        "The same for the passages collection (roles: id, title, text, url, language, "
        "modified, parent, vector; Datafari's VectorMain: text=embedded_content,"
        "parent=parent_doc). Defaults: our configset's (text=content, parent=parent_id; "
        "vector: solr.vector.field).",
        max_length=2000,
    )
    embeddings_model: str = _key(
        "solr.embeddings.model",
        "default_model",
        "The embeddings model whose vectors solr.vector.field holds (Datafari's name for it); "
        "default_model: the one ai.embeddings.model names. When only this key names one, the "
        "embeddings API is asked for it.",
    )
    embeddings_mode: Literal["auto", "service", "solr"] = _key(
        "solr.embeddings.mode",
        "auto",
        "Who turns text into solr.vector.field's vectors: service (the service embeds passages "
        "at ingestion and each question, and sends Solr vectors: any Solr), solr (the passages "
        "collection embeds with our text-to-vector plugin: ingestion sends text, a search the "
        "question's text, and documents any other client indexes there get vectors too), or "
        "auto: solr when the collection's configuration has the plugin embedding title and "
        "content with ai.embeddings.model, service otherwise.",
    )
    timeout_connect: float = _key(
        "solr.timeout.connect", 5.0, "Seconds to connect to Solr.", gt=0, le=600
    )
    timeout_read: float = _key(
        "solr.timeout.read", 30.0, "Seconds to wait for a Solr answer.", gt=0, le=3600
    )
    startup_check: bool = _key(
        "solr.startup.check",
        True,
        "At startup, check that Solr's collections and the fields the service uses exist, and "
        "refuse to start with a message naming what is missing.",
    )
    startup_wait: float = _key(
        "solr.startup.wait",
        30.0,
        "Seconds the startup check waits for Solr to answer (it may still be starting).",
        ge=0,
        le=3600,
    )

    write_retries: int = _key(
        "solr.write.retries",
        3,
        "Times a write to Solr (documents by id, deletes, commits: each idempotent) is sent "
        "again after Solr timed out, was unreachable or answered 5xx, waiting 1, 2, 4... s "
        "(at most 8 s) between tries, each try after a timeout waiting twice as long as the "
        "last (at most 300 s); a slow or restarting Solr then costs a pause, not an "
        "ingestion run.",
        ge=0,
        le=10,
    )
    auth_user: str = _key(
        "solr.auth.user",
        "",
        "User of Solr's BasicAuthPlugin (security.json), sent with every request to solr.url's "
        "nodes with solr.auth.password; empty: none. Answering needs Solr's read permissions; "
        "ingestion, the answer cache and conversations need update too (docs/security.md).",
        max_length=256,
    )
    auth_password: SecretStr = _secret(
        "solr.auth.password",
        "Password of solr.auth.user (environment: SOLR_RAG_SOLR_AUTH_PASSWORD); never shown.",
        sent_to=SOLR_NODES,
    )
    auth_token: SecretStr = _secret(
        "solr.auth.token",
        "Bearer token for a Solr secured by JWTAuthPlugin (environment: "
        "SOLR_RAG_SOLR_AUTH_TOKEN), instead of a user and password; never shown.",
        sent_to=SOLR_NODES,
    )
    tls_ca: str = _key(
        "solr.tls.ca",
        "",
        "PEM file of the certificate authorities that sign Solr's certificate, for an https "
        "solr.url signed by an organisation's own CA (empty: the system's usual CAs). Checked "
        "at load: a file that holds no certificate is refused.",
        max_length=4096,
    )
    tls_cert: str = _key(
        "solr.tls.cert",
        "",
        "PEM file of the client certificate for a Solr that asks for one (mutual TLS), with "
        "solr.tls.key (or the key in the same file); empty: none.",
        max_length=4096,
    )
    tls_key: str = _key(
        "solr.tls.key",
        "",
        "PEM file of solr.tls.cert's private key (empty: the key is in solr.tls.cert's file).",
        max_length=4096,
    )
    tls_key_password: SecretStr = _secret(
        "solr.tls.key.password",
        "Password of an encrypted solr.tls.key (environment: SOLR_RAG_SOLR_TLS_KEY_PASSWORD); "
        "never shown.",
        # only unlocks the key on this host: the handshake proves the key's possession to
        # the node called, the password itself never leaves (the TLS files are read-only)
        sent_to=NOWHERE,
    )
    zk_user: str = _key(
        "solr.zk.digest.user",
        "",
        "ZooKeeper digest user for a SolrCloud whose ZooKeeper data is under ACLs (Solr's "
        "zkDigestReadonlyUsername is enough: the live nodes are only read); empty: none.",
        max_length=256,
    )
    zk_password: SecretStr = _secret(
        "solr.zk.digest.password",
        "Password of solr.zk.digest.user (environment: SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD); "
        "never shown.",
        sent_to=("solr.zk.hosts",),
    )

    @field_validator("vector_field", "embeddings_model")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("vector_field")
    @classmethod
    def _field_name(cls, value: str) -> str:
        # written into Solr's local params ({!knn f=...}, knn.rescore's vectorSimilarity)
        if not _FIELD_NAME.match(value):
            raise ValueError("a Solr field name is letters, digits, '_', '.' and '-'")
        return value

    @field_validator("auth_user", "zk_user")
    @classmethod
    def _user_name(cls, value: str) -> str:
        value = value.strip()
        if ":" in value or _CONTROL.search(value):
            raise ValueError("a user name has no ':' and no control characters")
        return value

    _header_safe = field_validator(
        "auth_password", "auth_token", "zk_password", "tls_key_password"
    )(_sendable)

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, value: str) -> str:
        for url in value.split(","):
            if "@" in url.split("://", 1)[-1].split("/", 1)[0]:
                raise ValueError(
                    "holds credentials (user:password@): put the user in solr.auth.user and "
                    "the password in SOLR_RAG_SOLR_AUTH_PASSWORD, so it is never shown or logged"
                )
        return value

    @property
    def zk_digest(self) -> str:
        """`user:password` of ZooKeeper's digest ACLs (solr.zk.digest.*), "" without them."""
        return f"{self.zk_user}:{self.zk_password.get_secret_value()}" if self.zk_user else ""

    @property
    def tls(self) -> TlsFiles:
        """solr.tls.* as files, as they are on disk now."""
        return TlsFiles.read(
            self.tls_ca, self.tls_cert, self.tls_key, self.tls_key_password.get_secret_value()
        )

    @model_validator(mode="after")
    def _credentials_fit_together(self) -> SolrSettings:
        password = bool(self.auth_password.get_secret_value())
        if self.auth_token.get_secret_value() and (self.auth_user or password):
            raise ValueError(
                "solr.auth.token and solr.auth.user/solr.auth.password are two ways to log in "
                "to Solr: set one of them"
            )
        if bool(self.auth_user) != password:
            raise ValueError(
                "solr.auth.user and solr.auth.password go together (the password in "
                "SOLR_RAG_SOLR_AUTH_PASSWORD): set both, or neither"
            )
        if bool(self.zk_user) != bool(self.zk_password.get_secret_value()):
            raise ValueError(
                "solr.zk.digest.user and solr.zk.digest.password go together: set both, or neither"
            )
        if self.zk_user and not self.zk_hosts:
            raise ValueError("solr.zk.digest.user is for solr.zk.hosts, which is empty")
        if self.tls_key and not self.tls_cert:
            raise ValueError("solr.tls.key needs its certificate in solr.tls.cert")
        tls_context(self.tls)  # raises ValueError naming the key and the fault
        return self

    @field_validator("documents_fields", "passages_fields")
    @classmethod
    def _field_map(cls, value: str, info: ValidationInfo) -> str:
        parse_fields(value, "documents" if info.field_name == "documents_fields" else "passages")
        return value.strip()

    @property
    def documents_map(self) -> FieldMap:
        """What the documents collection's fields hold (solr.documents.fields)."""
        return parse_fields(self.documents_fields, "documents")

    @property
    def passages_map(self) -> FieldMap:
        """What the passages collection's fields hold (solr.passages.fields); its vector:
        solr.vector.field unless the mapping names one."""
        mapped = parse_fields(self.passages_fields, "passages")
        if "vector" in mapped.named:
            return mapped
        return replace(mapped, roles={**mapped.roles, "vector": (self.vector_field,)})


class RetrievalSettings(Part):
    """How candidates are found: BM25, kNN or both fused, how many, with which queries."""

    method: Literal["", Retrieval] = _key(
        "retrieval.method",
        "",
        "bm25 (FileShare documents), vector (VectorMain passages by kNN) or hybrid (BM25 and "
        "kNN over VectorMain, fused: hybrid.fusion); empty: Datafari's "
        "solr.enable.vector.search decides (true: vector, false: bm25).",
    )
    vector_search_enabled: bool = _key(
        "solr.enable.vector.search",
        False,
        "Retrieve passages by kNN from VectorMain (Datafari's switch; retrieval.method, when "
        "set, decides instead).",
    )
    max_files: int = _key(
        "chunking.maxFiles", 3, "Documents retrieved by the BM25 search.", ge=1, le=100
    )
    in_memory: bool = _key(
        "rag.enable.vector.search",
        False,
        "Datafari's InMemory vector search: the documents the BM25 search finds are cut into "
        "passages (vector.chunk.size, vector.chunk.overlap), embedded with "
        "ai.embeddings.model (kept in memory, so a popular document is embedded once), and "
        "the inMemory.maxChunks passages nearest the question are what the LLM gets. Needs no "
        "passages collection: the vector search to turn on first over an existing index. "
        "Works on BM25 retrieval only (retrieval.method=bm25, or empty with "
        "solr.enable.vector.search=false).",
    )
    in_memory_chunks: int = _key(
        "inMemory.maxChunks",
        10,
        "Passages InMemory vector search keeps (rag.enable.vector.search).",
        ge=1,
        le=256,
    )
    operator: Literal["AND", "OR"] = _key(
        "rag.operator", "OR", "Operator between query terms in the BM25 search (q.op)."
    )
    bm25_fields: str = _key(
        "solr.bm25.qf",
        "title content",
        "Fields and boosts of the BM25 search (edismax qf).",
        min_length=1,
    )
    bm25_tie: float = _key(
        "solr.bm25.tie",
        1.0,
        "How much a query word's matches in the other fields add to its best field's score "
        "(edismax tie): 1 sums them, as if title and text were one field; 0 keeps the best.",
        ge=0,
        le=1,
    )
    top_k: int = _key("solr.topK", 10, "Passages retrieved by vector search.", ge=1, le=1000)
    knn_depth: int = _key(
        "knn.depth",
        1200,
        "Neighbours Solr's HNSW search looks for (its topK) before the nearest are kept, in a "
        "scope of more than knn.exact.max passages (a smaller one is searched exactly): the "
        "graph is approximate and finds more of the true nearest when it looks further. At "
        "1M passages in VectorMain's shipped layout (the dense graph, segments of ~125k, "
        "optimized to 8; bench.scale), 1200 finds 0.976 of the true ten with no filter and "
        "0.964 under one that keeps half the documents, hybrid p95 at most 145 ms under any "
        "ACL filter, the gold SQuAD passage in hybrid's top 10 for 95.7% of dev questions "
        "(1600: 0.976 / 0.977, 152 ms; 2400: 0.982 / 0.98, 184 ms).",
        ge=1,
        le=5000,
    )
    knn_exact_max: int = _key(
        "knn.exact.max",
        150_000,
        "A vector search whose scope (the caller's groups, filters, a partition) keeps at most "
        "this many passages scores every one of them (exact: the true nearest, recall 1.0) "
        "rather than searching HNSW's graph; 0: the graph always. Exact search costs about "
        "0.7 ms per 1,000 passages kept (at 1M under a filter keeping 100,000: p95 74 ms, "
        "where the graph at depth 2400 took 185 ms for recall 0.993; bench.scale_exact). The "
        "scope's size is Solr's count, asked at most once a minute. Not applied when Solr "
        "embeds the question (solr.embeddings.mode).",
        ge=0,
        le=10_000_000,
    )
    knn_rescore: bool = _key(
        "knn.rescore",
        False,
        "Scores the knn.depth neighbours HNSW found again by their float vectors (Solr's "
        "rerank with vectorSimilarity) before the nearest are kept: for quantized vectors "
        "(VectorMainQuantized), whose search compares approximations, the hits' order and "
        "scores become the floats' (recall@10 at 1M, depth 1200: 0.963 rescored, 0.937 not; "
        "the floats 0.924-0.965 at 800-2400; bench.scale_vectors). Set it true with "
        "VectorMainQuantized; float vectors need it not. Not applied when Solr embeds the "
        "question (solr.embeddings.mode).",
    )
    similarity_min: float = _key(
        "retrieval.similarity.min",
        0.25,
        "Nearest passages whose cosine similarity to the question is below this are dropped "
        "(vector and hybrid), so a question the documents do not answer finds nothing; 0: keep "
        "the solr.topK nearest, however far. all-MiniLM-L6-v2: hybrid finds nothing for 86% of "
        "off-topic questions on the samples, and for no answerable SQuAD question it found "
        "before (0.3: 93%, but 2.7% of those lost; bench.offtopic).",
        ge=0,
        le=1,
    )
    needs_meaning: bool = _key(
        "hybrid.needs.meaning",
        True,
        "Hybrid finds nothing when kNN finds nothing (no passage at retrieval.similarity.min): "
        "a question about something the documents do not hold is not answered from the "
        "passages BM25 matches by a shared word. false: BM25's matches alone may answer.",
    )
    fusion: Literal["score", "rrf"] = _key(
        "hybrid.fusion",
        "score",
        "How hybrid fuses its two rankings: score (each ranking's scores placed within 3 "
        "standard deviations of its mean, then averaged with the weights: how far ahead a hit "
        "is counts, whatever the model's cosine range) or rrf (reciprocal rank: "
        "weight / (k + rank)).",
    )
    candidates: int = _key(
        "hybrid.candidates",
        100,
        "Passages each of hybrid's rankings (BM25, kNN) brings to the fusion; the fused list is "
        "cut to solr.topK. A passage just past a ranking's cut-off gets nothing from it, so "
        "this is deeper than solr.topK.",
        ge=1,
        le=1000,
    )
    rrf_k: int = _key(
        "hybrid.rrf.k", 60, "k of reciprocal rank fusion: 1/(k + rank).", ge=1, le=100_000
    )
    bm25_weight: float = _key(
        "hybrid.weight.bm25", 1.0, "Weight of the BM25 ranking in the fusion.", ge=0, le=100
    )
    foreign_weight: float = _key(
        "hybrid.weight.vector.foreign",
        0.25,
        "Weight of the kNN ranking for a question in a language the embedding model does not "
        "read (ai.embeddings.languages; the question's language told from its words), and no "
        "similarity floor for it: an English encoder's French vectors pull wrong passages up "
        "(French FAQ nDCG@10: 0.569 at 1.5, 0.614 at 0.25, BM25 0.613; bench/RESULTS.md "
        "French). 0: BM25 alone for such questions.",
        ge=0,
        le=100,
    )
    flat_spread: float | None = _key(
        "hybrid.flat.spread",
        None,
        "When the kNN ranking's best cosine similarity is within this of its last one (its "
        "top is flat: nothing stands out), the kNN ranking weighs hybrid.weight.vector.foreign "
        "instead (bench/RESULTS.md has what was measured). Blank: off.",
        allow_inf_nan=False,
        gt=0,
        le=2,
    )
    vector_weight: float = _key(
        "hybrid.weight.vector",
        1.5,
        "Weight of the kNN ranking in the fusion. 1.5: of the fusions measured on Cranfield, "
        "CISI and SQuAD together (bench.retrieval), the best mean nDCG@10 of those never below "
        "the better of BM25 and kNN alone on any of them.",
        ge=0,
        le=100,
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

    @model_validator(mode="after")
    def _in_memory_ranks_bm25_documents(self) -> RetrievalSettings:
        if self.in_memory and self.in_force != "bm25":
            raise ValueError(
                "rag.enable.vector.search (InMemory vector search) ranks the passages of the "
                f"documents BM25 finds, but retrieval is {self.in_force}: set "
                "retrieval.method=bm25, or turn rag.enable.vector.search off"
            )
        return self

    @property
    def in_force(self) -> Retrieval:
        """The retrieval in force: retrieval.method when set, else Datafari's switch."""
        if self.method:
            return self.method
        return "vector" if self.vector_search_enabled else "bm25"

    @property
    def limit(self) -> int:
        """How many documents (BM25) or passages (kNN, hybrid) one search returns."""
        return self.max_files if self.in_force == "bm25" else self.top_k


class PromptSettings(Part):
    """How retrieved text becomes LLM requests: chunks, the request budget, the chain."""

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
    strategy: Literal["stuff", "mapreduce", "refine"] = _key(
        "prompt.chunking.strategy",
        "refine",
        "How chunks that do not fit in one request are handled: stuff, mapreduce or refine.",
    )
    answer_form: Literal["auto", "short", "sentence"] = _key(
        "prompt.answer.form",
        "auto",
        "The form of an answer from sources (stuff chain, no format asked): short (a few "
        "words and the number of a source sent, or the exact not-found sentence, nothing else: "
        "held to it by a grammar, which llama.cpp's server understands; the citation then "
        "moved to the source that holds the answer's words), sentence (as the prompt asks), or "
        "auto (short for the service's own local models, sentence otherwise).",
    )
    answer_phrase: bool = _key(
        "prompt.answer.phrase",
        True,
        "A short answer (prompt.answer.form) to a question a phrase answers (who, what, when, "
        "where, which, how many...; not why, how or a yes/no question) is cut to its words the "
        "question does not say, with its citation ('The Six Ministries existed since the Sui "
        "and Tang dynasties. [1]' -> 'since the Sui and Tang dynasties [1]'); streamed once "
        "whole. false: the answer as the model wrote it.",
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
        "Optional token budget of one request (0: off), counted by llm.tokenizer; both "
        "budgets apply.",
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
    templates_dir: str = _key(
        "prompt.templates.dir", "prompts", "Folder of the jinja2 prompt templates.", min_length=1
    )

    @field_validator("templates_dir")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class ChatSettings(Part):
    """What the conversation's history is used for."""

    memory_enabled: bool = _key(
        "chat.memory.enabled", False, "Send the chat history to the LLM with each request."
    )
    history_size: int = _key(
        "chat.memory.history.size", 6, "Messages of history sent to the LLM.", ge=0, le=100
    )
    rewriting_enabled: bool = _key(
        "chat.query.rewriting.enabled", False, "Let the LLM rewrite the search query first."
    )


class RerankSettings(Part):
    """A rerank API that orders the chunks by their relevance to the question before the
    chain (Cohere's `/rerank` shape, served by TEI, Jina, Cohere, vLLM, Infinity)."""

    enabled: bool = _key(
        "rerank.enabled",
        False,
        "Send the chunks retrieval found to the rerank API with the question and keep the "
        "rerank.top.n most relevant, best first, for the chain (the retrieval order is kept "
        "when the API fails; the failure is logged).",
    )
    endpoint: HttpUrl = _key(
        "rerank.endpoint",
        "http://127.0.0.1:8080/v1/",
        "Base URL of the rerank API (the part before /rerank).",
        min_length=1,
    )
    token: SecretStr = _secret(
        "rerank.token", "Bearer token of the rerank API; never shown.", sent_to=("rerank.endpoint",)
    )
    _token_sendable = field_validator("token")(_sendable)
    model: str = _key("rerank.model", "", "Model name sent to the rerank API (blank: its default).")
    top_n: int = _key(
        "rerank.top.n",
        5,
        "Chunks kept after reranking, the most relevant first.",
        ge=1,
        le=1000,
    )
    top_n_parts: int | None = _key(
        "rerank.top.n.parts",
        None,
        "Chunks kept after reranking when the question has parts (two questions in one, a "
        "second clause with its own question word, a comparison: service/text/parts.py) or "
        "when the next chunks score within rerank.close.margin of the best: one passage per "
        "part. Blank: rerank.top.n always.",
        ge=1,
        le=1000,
    )
    close_margin: float | None = _key(
        "rerank.close.margin",
        None,
        "Chunks the rerank API scores within this of the best one are kept too (the reranker "
        "is not sure which holds the answer), up to rerank.top.n.parts. In the API's units. "
        "Blank: off.",
        allow_inf_nan=False,
        ge=0,
        le=1000,
    )
    max_chunks: int = _key(
        "rerank.max.chunks",
        100,
        "Chunks sent to the rerank API at most (the first ones retrieval found); the others "
        "are left out.",
        ge=1,
        le=1000,
    )
    max_tokens: int | None = _key(
        "rerank.max.tokens",
        None,
        "Tokens of a (question, chunk) pair the rerank API reads at most, the chunk cut first "
        "(sent as Cohere's max_tokens_per_doc; the local cross-encoder's cost is about "
        "proportional to it). Blank: not sent, the API's own (the local one: 512).",
        ge=16,
        le=8192,
    )
    cut: RerankCut = _key(
        "rerank.cut",
        "end",
        "How a chunk longer than rerank.max.tokens is cut: end (its first tokens kept, what "
        "every rerank API does) or nearest (its sentences that share most words with the "
        "question kept, in their order, as many as fit: the model server's, sent as "
        "passage_cut; another API may refuse it). A French passage costs the English "
        "cross-encoder twice the tokens: cut at its end it loses its second half.",
    )
    timeout: float = _key(
        "rerank.timeout", 30.0, "Seconds to wait for the rerank API's answer.", gt=0, le=3600
    )
    order: RerankOrder = _key(
        "rerank.order",
        "reranker",
        "The chunks' order after reranking: reranker (the rerank API's scores alone) or blend "
        "(the sum of its scores' and retrieval's z-scores: retrieval's order tempers the "
        "reranker's, as keyword queries over technical text need; bench/RESULTS.md).",
    )
    window_sentences: int = _key(
        "rerank.window.sentences",
        0,
        "Each chunk kept after reranking is cut to its run of this many consecutive sentences "
        "the rerank API scores best (one more request, of short texts): the LLM reads the "
        "evidence, not the passage around it, in a fraction of the tokens. 0: chunks whole.",
        ge=0,
        le=50,
    )
    min_score: float | None = _key(
        "rerank.min.score",
        None,
        "Chunks the rerank API scores below this are left out, and when none is left the "
        "answer is ragNoFileFound (428), its reason naming the best score: the documents do "
        "not say it, and no LLM call is made. In the API's own units (the local cross-encoder: "
        "logits, about -11 to 11; Cohere: 0 to 1). Blank: every score kept.",
        allow_inf_nan=False,
        ge=-1000,
        le=1000,
    )

    @field_validator("model")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class JobsSettings(Part):
    """Ingestion as jobs (POST /jobs): where they are kept, how many run, how big a batch."""

    enabled: bool = _key(
        "jobs.enabled",
        False,
        "Serve /jobs: ingestion that runs in the background, watched, cancelled and resumed "
        "after a restart; needs the jobs collection (jobs.collection).",
    )
    collection: str = _key(
        "jobs.collection",
        "IngestJobs",
        "Solr collection of the jobs (configset solr/configsets/IngestJobs): every worker and "
        "a restarted service see them.",
        pattern=COLLECTION_NAME,
    )
    max_running: int = _key(
        "jobs.max.running",
        2,
        "Jobs that run at once in the whole deployment; the others wait in the queue.",
        ge=1,
        le=64,
    )
    max_queued: int = _key(
        "jobs.max.queued",
        20,
        "Jobs waiting or running at once; beyond, POST /jobs gets a 429 with Retry-After.",
        ge=1,
        le=10_000,
    )
    max_per_caller: int = _key(
        "jobs.max.per.caller",
        4,
        "Jobs one caller (its API key, JWT subject or address) may have waiting or running; "
        "beyond, a 429 with Retry-After.",
        ge=1,
        le=10_000,
    )
    batch_size: int = _key(
        "jobs.batch.size",
        100,
        "Documents indexed and committed together: a cancelled job stops after its batch, a "
        "resumed one starts at the first batch not committed.",
        ge=1,
        le=10_000,
    )
    max_bytes: int = _key(
        "jobs.max.bytes",
        67_108_864,
        "Largest body of POST /jobs and POST /jobs/upload, in bytes (up to 100,000 documents "
        "or files a job); other requests keep request.max.bytes. Larger ones get a 413.",
        ge=1024,
        le=1_073_741_824,
    )
    sync_folders: str = _key(
        "jobs.sync.folders",
        "",
        "Folders of the server that POST /jobs/sync may bring the index in step with (their "
        "sub-folders too), comma-separated absolute paths; empty: none (the endpoint is off). "
        "Set on the server only (rag.properties or the environment): read-only through the "
        "admin API, so the admin token cannot make any file of the host a document.",
    )
    lease_seconds: float = _key(
        "jobs.lease.seconds",
        30.0,
        "Seconds a worker holds a running job without news from it: a worker that died (a "
        "crash, kill -9) leaves its job to be resumed by another, or itself restarted, after "
        "this long.",
        ge=2,
        le=3600,
    )

    @field_validator("sync_folders")
    @classmethod
    def _plain_folders(cls, value: str) -> str:
        """Absolute paths of ordinary folders: never the root, the kernel's or the devices'
        file systems, nor a path with control characters (a NUL would fail every sync)."""
        for folder in (part.strip() for part in value.split(",")):
            if not folder:
                continue
            if any(ord(c) < 32 or ord(c) == 127 for c in folder):
                raise ValueError("holds a control character")
            if not folder.startswith("/"):
                raise ValueError(f"{folder!r} is not an absolute path")
            parts = [p for p in folder.split("/") if p not in ("", ".")]
            if not parts or ".." in parts:
                raise ValueError(f"{folder!r}: name a folder below / without ..")
            if parts[0] in ("proc", "sys", "dev", "run"):
                raise ValueError(f"{folder!r} is a system folder (/proc, /sys, /dev, /run)")
        return value


class ConversationSettings(Part):
    """The conversations the service keeps for Datafari 7's `conversationId` (POST /ai)."""

    enabled: bool = _key(
        "conversations.enabled",
        False,
        "Keep conversations for POST /ai: a reply names its conversationId, and a client then "
        "sends only the new message; needs the conversations collection.",
    )
    collection: str = _key(
        "conversations.collection",
        "Conversations",
        "Solr collection of the conversations (configset solr/configsets/Conversations).",
        pattern=COLLECTION_NAME,
    )
    max_messages: int = _key(
        "conversations.max.messages",
        20,
        "Messages kept per conversation (questions and answers); older ones are dropped.",
        ge=2,
        le=1_000,
    )
    max_message_chars: int = _key(
        "conversations.max.message.chars",
        4_000,
        "Characters kept of each message (an answer's start, a question's start).",
        ge=100,
        le=100_000,
    )
    ttl_hours: float = _key(
        "conversations.ttl.hours",
        24.0,
        "Hours a conversation is kept after its last message; then it is gone.",
        gt=0,
        le=24 * 365,
    )
    max_per_caller: int = _key(
        "conversations.max.per.caller",
        50,
        "Conversations one caller may keep; a new one beyond deletes the caller's oldest.",
        ge=1,
        le=10_000,
    )


AGENT_TOOLS = TOOL_NAMES  # the agents' tools (service.agents.tools registers each)
# Datafari 7's generic agent: its tools, by its names
GENERIC_AGENT = (
    "generic=bm25Search,hybridSearch,ragByDocument,searchChunksFromADocument,readNextChunks,"
    "entityExtraction,summarize"
)
_AGENT = re.compile(r"[\w.-]{1,64}")


class AgenticSettings(Part):
    """Datafari 7's action=agentic: an LLM that calls our tools, step by step."""

    enabled: bool = _key(
        "agentic.enabled",
        False,
        "Serve action=agentic on POST /ai: the LLM calls our tools (search, ask, summarize, "
        "get_document, with the caller's rights) over several steps, then answers; needs an "
        "LLM that supports the OpenAI tools API (llama.cpp's server: --jinja).",
    )
    max_steps: int = _key(
        "agentic.max.steps",
        4,
        "Tool-calling turns of the LLM before it must answer with what it found (the call "
        "budget llm.max.calls and request.timeout bound it too).",
        ge=1,
        le=20,
    )
    protocol: Literal["auto", "tools", "json"] = _key(
        "agentic.protocol",
        "auto",
        "How the LLM calls tools: tools (OpenAI's tools API), json (one JSON step a turn, "
        "held to a grammar: for small local models), auto (json for the GGUF models llama.cpp "
        "serves us, tools otherwise).",
    )
    agents: str = _key(
        "agentic.agents",
        "default=search,ask,summarize,get_document;" + GENERIC_AGENT,
        "The agents a request's `agent` may name, `name=tool,tool` separated by `;` (tools: "
        + ", ".join(AGENT_TOOLS)
        + "). A name "
        "not listed is generic when there is one (Datafari's fallback; rag too), else the "
        "first; none named: the first.",
        min_length=1,
        max_length=4_000,
    )

    @field_validator("agents")
    @classmethod
    def _agents(cls, value: str) -> str:
        agents_of(value)
        return value


def agents_of(text: str) -> dict[str, tuple[str, ...]]:
    """agentic.agents as {name: tools}; ValueError naming what is wrong."""
    agents: dict[str, tuple[str, ...]] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        name, sep, tools = item.partition("=")
        name = name.strip()
        listed = tuple(dict.fromkeys(t.strip() for t in tools.split(",") if t.strip()))
        if not sep or not _AGENT.fullmatch(name) or not listed:
            raise ValueError(f"{item[:80]!r} is not name=tool,tool (e.g. default=search,ask)")
        unknown = [tool for tool in listed if tool not in AGENT_TOOLS]
        if unknown:
            raise ValueError(f"unknown tools {unknown}: the tools are {', '.join(AGENT_TOOLS)}")
        agents[name] = listed
    if not agents:
        raise ValueError("name at least one agent, e.g. default=search,ask")
    return agents


class GroundingSettings(Part):
    """Whether each sentence of an answer is checked against its sources, and what is done
    with the sentences they do not support."""

    enabled: bool = _key(
        "grounding.enabled",
        False,
        "Check each sentence of an answer against the sources it cites (or, uncited, all the "
        "sources sent) and report it with the answer (`grounding`).",
    )
    method: Literal["words", "embeddings", "llm"] = _key(
        "grounding.method",
        "embeddings",
        "words: a source sentence holds most of the sentence's content words, its numbers and "
        "its negation; embeddings: also accepted when nearly the same in meaning (one call to "
        "the embeddings API for the sentences words leave open); llm: the LLM judges each "
        "sentence against its closest source sentences (one or more calls, within "
        "llm.max.calls.per.request; embeddings when none is left or the LLM fails).",
    )
    min_overlap: float = _key(
        "grounding.min.overlap",
        0.6,
        "Share of a sentence's content words one source sentence (or two consecutive ones) "
        "must hold to support it.",
        gt=0,
        le=1,
    )
    min_similarity: float = _key(
        "grounding.min.similarity",
        0.8,
        "Cosine similarity of embeddings at which a source sentence supports a sentence whose "
        "words it does not hold (method embeddings).",
        gt=0,
        le=1,
    )
    action: Literal["flag", "drop", "refuse"] = _key(
        "grounding.action",
        "flag",
        "flag: answer as written, unsupported sentences marked (none supported: the not-found "
        "sentence, abstained); drop: unsupported sentences removed from the answer; refuse: "
        "ragNoValidAnswer when fewer than grounding.min.ratio of the sentences are supported, "
        "or when the answer says nothing was found.",
    )
    min_ratio: float = _key(
        "grounding.min.ratio",
        0.5,
        "Share of an answer's sentences that must be supported (grounding.action=refuse).",
        ge=0,
        le=1,
    )
    echo: bool = _key(
        "grounding.echo",
        True,
        "An answer whose content words, besides the question's, are in none of its sources, "
        'and none of whose phrases ("rather than the end") a source holds that the '
        "question does not (it only says the question back, or nothing the documents say), "
        "becomes the not-found sentence, abstained; it is held back while streamed until it "
        "says something of its sources. An answer in another language than its sources is not "
        "checked.",
    )
    echo_again: bool = _key(
        "grounding.echo.again",
        True,
        "An answer the echo check refuses is asked for once more (one LLM call, within "
        "llm.max.calls.per.request): the answer's request, the echo, then prompts/again.j2; the "
        "second answer is kept if it says something of its sources, else the refusal stands "
        "(a stuff answer only).",
    )
    abstain_not_found: float | None = _key(
        "grounding.abstain.not.found",
        None,
        "An answer becomes the not-found sentence (abstained) when the LLM's first step gave "
        "that sentence's first token at least this probability, whatever it then wrote: the "
        "model's own doubt, known before any word is shown (llm.logprobs; bench/RESULTS.md has "
        "the curve). Blank: reported in `confidence` only.",
        allow_inf_nan=False,
        gt=0,
        le=1,
    )
    verify: bool = _key(
        "grounding.verify",
        False,
        "Before a stuff answer, ask the LLM one more question on the same prompt: does a "
        'document above say the answer? Its probability of "yes" (one token; the LLM\'s prompt '
        "cache serves the shared beginning) is the answer's `confidence.supported` "
        "(llm.logprobs), and grounding.abstain.unsupported's signal.",
    )
    verify_parallel: Literal["auto", "true", "false"] = _key(
        "grounding.verify.parallel",
        "auto",
        "With grounding.verify: the verification sent beside the answer's request instead of "
        "before it (one round trip to the LLM, not two in a row): the answer's text is held "
        "until its probability of yes is known, and below grounding.abstain.unsupported the "
        "answer's request is abandoned. auto: beside, unless llm.model is one of the GGUF "
        "models llama.cpp serves for us (one after the other, the answer's request reads the "
        "verification's from llama.cpp's prompt cache, and a few cores answer one prompt at a "
        "time).",
    )
    abstain_unsupported: float | None = _key(
        "grounding.abstain.unsupported",
        None,
        "With grounding.verify: an answer becomes the not-found sentence (abstained) when the "
        'LLM gave "yes, a document says the answer" less than this probability, known before '
        "any word is written (bench/RESULTS.md has the curve). Blank: reported only.",
        allow_inf_nan=False,
        gt=0,
        le=1,
    )


class CacheSettings(Part):
    """The semantic answer cache: answers found again by the meaning of their question."""

    enabled: bool = _key(
        "cache.enabled",
        False,
        "Answer a question from the answer already given to one that means the same (kNN over "
        "solr.collection.cache), with the same configuration, index state, caller's groups, "
        "id, lang and format, and no chat history.",
    )
    min_similarity: float = _key(
        "cache.min.similarity",
        0.95,
        "Cosine similarity of the two questions' embeddings at which a cached answer is used.",
        ge=0.5,
        le=1,
    )
    ttl: int = _key(
        "cache.ttl",
        86400,
        "Seconds a cached answer is used (its question is kept in Solr as long).",
        ge=1,
        le=31_536_000,
    )
    max_entries: int = _key(
        "cache.max.entries",
        10_000,
        "Answers kept; beyond, the oldest are removed.",
        ge=1,
        le=10_000_000,
    )


class SecuritySettings(Part):
    """Who may call, who may administer, and which documents a caller may see."""

    enabled: bool = _key(
        "security.enabled",
        False,
        "Document-level security: searches return only documents whose allowed_groups meet "
        "the caller's groups (or that have none), never those whose denied_groups do.",
    )
    model: Literal["groups", "manifoldcf"] = _key(
        "security.model",
        "groups",
        "Which fields say who may see a document: groups (ours: allowed_groups, none: "
        "public, and denied_groups) or manifoldcf (what ManifoldCF's connectors, and so "
        "Datafari, write: allow_token_document|parent|share and deny_token_document|parent|"
        "share, __nosecurity__ meaning open; the caller's groups are its access tokens).",
    )
    groups_header: str = _key(
        "security.groups.header",
        "X-User-Groups",
        "Request header with the caller's groups, comma-separated, set by the trusted proxy "
        "in front of the service (which must remove any such header clients send).",
        pattern=r"^[A-Za-z0-9-]{1,64}$",
    )
    user_header: str = _key(
        "security.user.header",
        "",
        "Request header naming the person (one user name), set by the trusted proxy in front "
        "of the service with security.identity=header (which must remove any such header "
        "clients send): their conversations and memories are then theirs, not their API "
        "key's. Empty: none (a person is known only from a verified JWT's sub).",
        pattern=r"^$|^[A-Za-z0-9-]{1,64}$",
    )
    identity: Literal["header", "jwt"] = _key(
        "security.identity",
        "header",
        "Where the caller's groups come from: header (security.groups.header, set by a trusted "
        "proxy) or jwt (a signed token in `Authorization: Bearer`, verified with "
        "security.jwt.key; its security.jwt.groups.claim lists the groups).",
    )
    identity_required: bool = _key(
        "security.identity.required",
        True,
        "Where an identity source is configured (security.identity=jwt with its key, or "
        "header with security.user.header), a request that sends none (the API key alone) "
        "is a 401. False: it is answered, and, its groups being unknown, it sees no "
        "document that denies any group (denied_groups; manifoldcf: any deny token).",
    )
    scores_exposed: bool = _key(
        "security.scores.exposed",
        False,
        "With security.enabled, whether callers are shown Solr's own relevance scores "
        "(/search/select's score, MCP's search, KAITO's retrieve). BM25 counts every "
        "document, hidden ones too, so a word's score tells whether documents the caller "
        "may not see hold it. False: a score of the rank alone (1/rank) instead.",
    )
    jwt_key: SecretStr = _secret(
        "security.jwt.key",
        "Key that verifies identity tokens: a PEM public key (RS256/ES256) or an HS256 shared "
        "secret.",
        sent_to=NOWHERE,
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
    api_keys: SecretStr = _secret(
        "api.keys",
        "API keys the public endpoints (/ai/*, /v1/*, /search/*) require, comma-separated, sent "
        "as `Authorization: Bearer <key>` or `X-API-Key: <key>`; empty: no key needed.",
        sent_to=NOWHERE,
    )
    admin_token: SecretStr = _secret(
        "admin.token", "Bearer token of the admin API (ADMIN_TOKEN env wins).", sent_to=NOWHERE
    )

    @model_validator(mode="after")
    def _jwt_identity_needs_a_key(self) -> SecuritySettings:
        if self.enabled and self.identity == "jwt" and not self.jwt_key:
            raise ValueError(
                "security.identity=jwt needs security.jwt.key (without it no caller could be "
                "identified and every request would fail)"
            )
        return self


# how spans are sent: OTLP's two transports (the Python exporters have no http/json)
TracingProtocol = Literal["http/protobuf", "grpc"]


def collector_url_problem(value: str) -> str | None:
    """What keeps `value` from being an OTLP collector's URL (http(s), a host and a valid
    port, no login, query string or fragment: a span exporter's credentials go in
    OTEL_EXPORTER_OTLP_HEADERS, never in a key the admin page shows or a log line), or None."""
    if re.match(r"^https?://[^\s/@?#]+(/[^\s?#@]*)?$", value):
        try:
            parts = urlsplit(value)
            if parts.hostname and parts.port != 0:
                return None
        except ValueError:  # an unclosed [IPv6, a port out of range or not a number
            pass
        return "must name the collector's host and, if any, a port from 1 to 65535"
    return (
        "must be the collector's http:// or https:// URL without user:password@, query "
        "string or fragment (give its credentials in OTEL_EXPORTER_OTLP_HEADERS), or empty"
    )


def _collector_url(value: str) -> str:
    """An OTLP collector's URL (collector_url_problem), or empty."""
    problem = collector_url_problem(value) if value else None
    if problem is not None:
        raise ValueError(problem)
    return value


CollectorUrl = Annotated[str, AfterValidator(_collector_url)]


class ObservabilitySettings(Part):
    """OpenTelemetry traces of each question (service.tracing): read at startup; the standard
    OTEL_* environment variables win over these keys."""

    tracing_enabled: bool = _key(
        "observability.tracing.enabled",
        False,
        "Send one OpenTelemetry trace per question (the HTTP request, each stage, each Solr, "
        "embeddings, rerank and LLM call) over OTLP; the response's X-Request-Id is then its "
        "trace id. Also on when OTEL_EXPORTER_OTLP_ENDPOINT is set; off whatever this says "
        "with OTEL_SDK_DISABLED=true. Read at startup.",
    )
    tracing_endpoint: CollectorUrl = _key(
        "observability.tracing.endpoint",
        "",
        "The OTLP collector's base URL: http://host:4318 for http/protobuf (/v1/traces is "
        "added), http://host:4317 for grpc. OTEL_EXPORTER_OTLP_ENDPOINT wins. Empty: the "
        "exporter's default (localhost). Read at startup.",
    )
    tracing_protocol: TracingProtocol = _key(
        "observability.tracing.protocol",
        "http/protobuf",
        "OTLP's transport: http/protobuf (port 4318) or grpc (4317); "
        "OTEL_EXPORTER_OTLP_PROTOCOL wins. Read at startup.",
    )
    tracing_sample_ratio: float = _key(
        "observability.tracing.sample.ratio",
        1.0,
        "Share of questions traced (a trace an incoming traceparent samples is always "
        "followed, one it drops never); OTEL_TRACES_SAMPLER wins. Read at startup.",
        ge=0,
        le=1,
    )
    tracing_capture_content: bool = _key(
        "observability.tracing.capture.content",
        False,
        "Put the LLM's messages and answers in its spans (gen_ai.input.messages, "
        "gen_ai.output.messages): questions, documents and answers then reach the collector "
        "and whoever reads it (docs/security.md). Also on with "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. Read at startup.",
    )


class Settings(BaseModel):
    """Everything rag.properties can set, by part; immutable, so a reload swaps the whole."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = ServerSettings()
    openai: OpenAISettings = OpenAISettings()
    llm: LLMSettings = LLMSettings()
    embeddings: EmbeddingsSettings = EmbeddingsSettings()
    solr: SolrSettings = SolrSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    prompt: PromptSettings = PromptSettings()
    chat: ChatSettings = ChatSettings()
    rerank: RerankSettings = RerankSettings()
    jobs: JobsSettings = JobsSettings()
    conversations: ConversationSettings = ConversationSettings()
    agentic: AgenticSettings = AgenticSettings()
    grounding: GroundingSettings = GroundingSettings()
    cache: CacheSettings = CacheSettings()
    security: SecuritySettings = SecuritySettings()
    observability: ObservabilitySettings = ObservabilitySettings()

    @model_validator(mode="after")
    def _one_embeddings_model(self) -> Settings:
        named = self.solr.embeddings_model
        if named not in UNNAMED_MODELS and named != self.embeddings.model:
            raise ValueError(
                f"solr.embeddings.model says the vectors in {self.solr.vector_field} come from "
                f"{named!r}, but ai.embeddings.model embeds queries with "
                f"{self.embeddings.model!r}: vectors of two models cannot be compared; make "
                "them the same model (or reindex with the new one)"
            )
        return self

    @classmethod
    def of(cls, values: Mapping[str, object]) -> Settings:
        """Settings from rag.properties keys (text or typed values); pydantic's
        ValidationError names each bad key by the error's last location."""
        parts: dict[str, dict[str, object]] = {part: {} for part in cls.model_fields}
        places = key_places()
        for key, value in values.items():
            if key not in places:
                raise KeyError(key)
            part, _ = places[key]
            parts[part][key] = value
        return cls.model_validate(parts)

    def value(self, key: str) -> Any:
        """The typed value of one rag.properties key."""
        part, name = key_places()[key]
        return getattr(getattr(self, part), name)

    def values(self) -> dict[str, Any]:
        """Every key with its typed value."""
        return {key: self.value(key) for key in key_places()}

    def overridden(self, changes: Mapping[str, object]) -> Settings:
        """A copy with `changes` (rag.properties keys), validated like values from the file."""
        return type(self).of({**self.values(), **changes})

    def version(self) -> str:
        """A hash of every value (a secret only as set or not): what an answer was made
        under, so that answers made under other settings are not reused."""
        values = sorted((key, repr(value)) for key, value in self.values().items())
        return hashlib.sha256(repr(values).encode()).hexdigest()[:16]

    def token_counter(self, model: str | None = None) -> TokenCounter:
        """How llm.tokenizer counts the tokens of `model` (llm.model by default)."""
        return token_counter(self.llm.tokenizer, self.llm.model if model is None else model)


@cache
def key_places() -> dict[str, tuple[str, str]]:
    """rag.properties key -> (part, field), for every key."""
    places: dict[str, tuple[str, str]] = {}
    for part, holder in Settings.model_fields.items():
        model = holder.annotation
        assert isinstance(model, type) and issubclass(model, Part)
        for name, field in model.model_fields.items():
            places[field.alias or name] = (part, name)
    return places


def key_field(key: str) -> Any:
    """The pydantic field of one key: its type, default, limits and help text."""
    part, name = key_places()[key]
    model = Settings.model_fields[part].annotation
    return model.model_fields[name]  # type: ignore[union-attr]


def known_keys() -> list[str]:
    """Every rag.properties key, part by part."""
    return list(key_places())
