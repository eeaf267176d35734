"""What the web layer keeps between requests: config, pooled HTTP client, prompt templates."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from service.cache import AnswerCache
from service.chains import PromptLibrary, PromptStore
from service.config import ConfigStore, Settings
from service.config.settings import key_field
from service.errors import ConfigError, PromptTemplateError, ServiceError, SolrLayoutError
from service.ingest.indexer import Indexer, indexer_for
from service.ingest.indexes import KaitoIndexes
from service.ingest.sandbox import Extractor
from service.llm import ChatClient, CircuitBreaker, EmbeddingsClient, LLMOptions
from service.llm.budget import CallBudget
from service.llm.embeddings import embeddings_client
from service.pipeline import NO_OVERRIDES, Overrides, RagPipeline, SummarizePipeline
from service.retrieval import Retriever, Scope, SolrClient, VectorRetriever
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.factory import build_retriever, vector_retriever
from service.retrieval.in_memory import InMemorySearch, PassageVectors
from service.retrieval.layout import verify_layout
from service.retrieval.nodes import SolrNodes

P = TypeVar("P", RagPipeline, SummarizePipeline)

PROBE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Probe:
    """Each upstream's state (`{"status": "up"}`, or `down` with the reason) and the models
    the LLM lists."""

    checks: dict[str, dict[str, str]]
    llm_models: list[str]


def addresses(settings: Settings) -> dict[str, str]:
    """Where each upstream a probe names is: told to the admin only."""
    found = {
        "llm": settings.llm.endpoint,
        "embeddings": settings.embeddings.endpoint,
        f"solr:{settings.solr.documents_collection}": settings.solr.url,
        f"solr:{settings.solr.passages_collection}": settings.solr.url,
    }
    if settings.cache.enabled:
        found[f"solr:{settings.solr.cache_collection}"] = settings.solr.url
    return found


async def _probed(call: Awaitable[object]) -> dict[str, str]:
    try:
        await asyncio.wait_for(call, PROBE_TIMEOUT_SECONDS)
    except ServiceError as error:
        return {"status": "down", "reason": error.reason}
    except TimeoutError:
        return {"status": "down", "reason": f"no answer within {PROBE_TIMEOUT_SECONDS:g}s"}
    return {"status": "up"}


MAX_FILES = 100  # chunking.maxFiles' upper bound
DEFAULT_PROMPTS = key_field("prompt.templates.dir").default
# the project's templates: beside the source (a checkout), or in the working folder (Docker)
SHIPPED_PROMPTS = (Path(__file__).resolve().parent.parent / "prompts", Path.cwd() / "prompts")

# keys that decide where Solr, the collections and the vectors are: an edit of one is checked
# against Solr (and the embeddings API: the dimension of its vectors)
SOLR_LAYOUT_KEYS = frozenset(
    {
        "solr.url",
        "solr.collection.documents",
        "solr.collection.passages",
        "solr.collection.cache",
        "cache.enabled",
        "solr.vector.field",
        "solr.documents.fields",
        "solr.passages.fields",
        "security.enabled",
        "security.model",
        "solr.embeddings.mode",
        "solr.zk.hosts",
        "ai.embeddings.endpoint",  # a model of another dimension
        "ai.embeddings.model",
        "solr.startup.check",
    }
)


class Runtime:
    """Builds each request's pipeline from the settings in force at that moment."""

    def __init__(self, config_path: Path) -> None:
        self.config = ConfigStore(config_path)
        self.prompts = PromptStore(self._prompts_folder(self.config.current()))
        # one connection pool per upstream: httpcore checks every pooled connection on each
        # request, so one shared pool makes Solr calls pay for the LLM's connections too
        self._pools: dict[str, httpx.AsyncClient] = {}
        # one breaker per upstream API, shared by every request (see llm.circuit.*)
        self._breakers: dict[tuple[str, str, int, float], CircuitBreaker] = {}
        # what is known of each Solr node (up, resting after a failure), shared by every
        # request; a new one when solr.url, solr.nodes.discover or solr.zk.hosts change
        self._solr_nodes: tuple[tuple[str, bool, str], SolrNodes] | None = None
        # who embeds the passages and questions (solr.embeddings.mode; auto asks Solr once),
        # a new one when what it depends on changes
        self._embedding_mode: tuple[tuple[str, ...], EmbeddingMode] | None = None
        # uploaded files are extracted in a worker process (started on first use)
        self.extractor = Extractor()
        # InMemory vector search's passage vectors, by model and text (bounded LRU)
        self.passage_vectors = PassageVectors()

    async def start(self) -> None:
        """Opens the connection pools; checks Solr's layout (solr.startup.check), raising
        SolrLayoutError when it is unusable."""
        self._pools = {
            name: httpx.AsyncClient(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                follow_redirects=False,
            )
            for name in ("solr", "llm", "embeddings")
        }
        settings = self.settings()
        if settings.solr.startup_check:
            try:
                await verify_layout(
                    self.solr(settings),
                    settings.solr,
                    embeddings=self._plain_embeddings(settings),
                    cache=settings.cache.enabled,
                    security=settings.security.model if settings.security.enabled else None,
                )
                await self.embedding_mode(settings).verify(self.solr(settings))
            except SolrLayoutError:
                await self.stop()
                raise

    async def stop(self) -> None:
        self.extractor.close()
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()

    def settings(self) -> Settings:
        return self.config.current()

    def solr(self, settings: Settings) -> SolrClient:
        return SolrClient(
            self._client("solr"),
            self.solr_nodes(settings),
            connect_timeout=settings.solr.timeout_connect,
            read_timeout=settings.solr.timeout_read,
        )

    def solr_nodes(self, settings: Settings) -> SolrNodes:
        layout = settings.solr
        key = (layout.url, layout.discover_nodes, layout.zk_hosts)
        if self._solr_nodes is None or self._solr_nodes[0] != key:
            self._solr_nodes = key, SolrNodes.configured(layout)
        return self._solr_nodes[1]

    def embedding_mode(self, settings: Settings) -> EmbeddingMode:
        """Whether Solr or the service embeds VectorMain's text (solr.embeddings.mode)."""
        layout = settings.solr
        key = (
            layout.url,
            layout.passages_collection,
            layout.vector_field,
            layout.embeddings_mode,
            settings.embeddings.model,
        )
        if self._embedding_mode is None or self._embedding_mode[0] != key:
            self._embedding_mode = key, EmbeddingMode.of(settings)
        return self._embedding_mode[1]

    def llm(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatClient:
        """The configured LLM; a request may name its own model, max_tokens, temperature."""
        return ChatClient(
            self._client("llm"),
            LLMOptions(
                endpoint=settings.llm.endpoint,
                model=settings.llm.model if model is None else model,
                token=settings.llm.token.get_secret_value(),
                temperature=settings.llm.temperature if temperature is None else temperature,
                max_tokens=max_tokens or settings.llm.max_tokens,
                connect_timeout=settings.llm.timeout_connect,
                read_timeout=settings.llm.timeout_read,
                retries=settings.llm.retries,
                model_chosen_by_caller=model is not None,
            ),
            self.breaker(settings, "llm", settings.llm.endpoint),
            CallBudget(settings.llm.max_calls),  # a client is built per request
        )

    def embeddings(self, settings: Settings, *, model: str | None = None) -> EmbeddingsClient:
        breaker = self.breaker(settings, "embeddings", settings.embeddings.endpoint)
        return embeddings_client(self._client("embeddings"), settings, model=model, breaker=breaker)

    def _plain_embeddings(self, settings: Settings) -> EmbeddingsClient:
        """The embeddings API without its breaker or retries: a check's failure is not the
        traffic's, and a check does not insist."""
        return embeddings_client(self._client("embeddings"), settings, retries=0)

    def breaker(self, settings: Settings, upstream: str, endpoint: str) -> CircuitBreaker:
        """The circuit breaker of one API (the LLM and the embeddings API have one each, even
        on one endpoint: a failing chat model must not stop retrieval); a new one when its
        settings change."""
        key = (upstream, endpoint, settings.llm.circuit_failures, settings.llm.circuit_cooldown)
        if key not in self._breakers:
            self._breakers[key] = CircuitBreaker(
                settings.llm.circuit_failures, settings.llm.circuit_cooldown
            )
        return self._breakers[key]

    async def check_startable(self, settings: Settings, changed: set[str]) -> None:
        """Raises ConfigError when the service could not start on `settings` (its prompt
        templates do not load; Solr, when a key that locates it changed, lacks a collection
        or field), so an admin edit can never stop the next start."""
        try:
            PromptLibrary(self._prompts_folder(settings))
        except PromptTemplateError as error:
            raise ConfigError(f"prompt.templates.dir: {error}") from None
        if settings.solr.startup_check and changed & SOLR_LAYOUT_KEYS:
            try:
                await verify_layout(
                    self.solr(settings),
                    settings.solr,
                    wait=0,
                    embeddings=self._plain_embeddings(settings),
                    cache=settings.cache.enabled,
                    security=settings.security.model if settings.security.enabled else None,
                )
                await EmbeddingMode.of(settings).verify(self.solr(settings))
            except SolrLayoutError as error:
                raise ConfigError(str(error)) from None

    async def probe(self, settings: Settings, *, embeddings: bool = True) -> Probe:
        """Can each upstream the settings name be reached now? The LLM and the embeddings API
        list their models, each Solr collection answers a ping; each within
        PROBE_TIMEOUT_SECONDS. Reasons name upstreams, never their addresses."""
        solr = self.solr(settings)
        llm = self.llm(settings)
        models: list[str] = []

        async def llm_models() -> None:
            models.extend(await llm.list_models())

        layout = settings.solr
        checks = {
            "llm": llm_models(),
            f"solr:{layout.documents_collection}": solr.ping(layout.documents_collection),
            f"solr:{layout.passages_collection}": solr.ping(layout.passages_collection),
        }
        if settings.cache.enabled:
            checks[f"solr:{layout.cache_collection}"] = solr.ping(layout.cache_collection)
        if embeddings:
            checks["embeddings"] = self.embeddings(settings).list_models()
        results = await asyncio.gather(*(_probed(check) for check in checks.values()))
        return Probe(dict(zip(checks, results, strict=True)), models)

    def vector_retriever(
        self, settings: Settings, *, model: str | None, top_k: int | None, scope: Scope
    ) -> VectorRetriever:
        """kNN over the passages, with the embedding model a caller may name (then the
        service embeds the question: Solr's plugin knows one model)."""
        embeddings = self.embeddings(settings, model=model)
        own_model = model is None or model == settings.embeddings.model
        return vector_retriever(
            settings.solr,
            self.solr(settings),
            embeddings,
            top_k=top_k or settings.retrieval.top_k,
            scope=scope,
            mode=self.embedding_mode(settings) if own_model else None,
        )

    def indexer(self, settings: Settings) -> Indexer:
        return indexer_for(
            settings,
            self.solr(settings),
            self.embeddings(settings),
            mode=self.embedding_mode(settings),
        )

    def kaito_indexes(self, settings: Settings) -> KaitoIndexes:
        return KaitoIndexes(
            self.solr(settings), self.indexer(settings), settings.solr.documents_collection
        )

    def index_retriever(self, settings: Settings, scope: Scope, count: int) -> Retriever:
        """The configured retrieval, finding up to `count` documents or passages in `scope`."""
        sized = settings.overridden(
            {"solr.topK": count, "chunking.maxFiles": min(count, MAX_FILES)}
        )
        return build_retriever(
            sized.retrieval,
            sized.solr,
            self.solr(sized),
            self.embeddings(sized),
            scope=scope,
            mode=self.embedding_mode(sized),
        )

    def prompt_library(self, settings: Settings) -> PromptLibrary:
        return self.prompts.current(self._prompts_folder(settings))

    def rag_pipeline(self, overrides: Overrides = NO_OVERRIDES) -> RagPipeline:
        """The pipeline of one request, on the settings in force with its overrides."""
        settings = overrides.apply(self.settings())
        llm = self.llm(
            settings,
            model=overrides.model,
            max_tokens=overrides.max_tokens,
            temperature=overrides.temperature,
        )
        return self._pipeline(RagPipeline, settings, llm, self.answer_cache(settings))

    def answer_cache(self, settings: Settings) -> AnswerCache | None:
        """The semantic answer cache (cache.enabled), or None."""
        if not settings.cache.enabled:
            return None
        return AnswerCache(
            self.solr(settings), self.embeddings(settings), settings.solr, settings.cache
        )

    def summarize_pipeline(self) -> SummarizePipeline:
        return self._pipeline(SummarizePipeline)

    def _pipeline(
        self,
        kind: type[P],
        settings: Settings | None = None,
        llm: ChatClient | None = None,
        answer_cache: AnswerCache | None = None,
    ) -> P:
        settings = settings or self.settings()
        return kind(
            settings,
            self.solr(settings),
            llm or self.llm(settings),
            self.embeddings(settings),
            self.prompt_library(settings),
            answer_cache,
            self.embedding_mode(settings),
            self.in_memory(settings),
        )

    def in_memory(self, settings: Settings) -> InMemorySearch | None:
        """InMemory vector search (rag.enable.vector.search), its vectors shared by every
        request; None when off."""
        if not settings.retrieval.in_memory:
            return None
        return InMemorySearch(
            self.passage_vectors,
            size=settings.embeddings.passage_size,
            overlap=settings.embeddings.passage_overlap,
            max_chunks=settings.retrieval.in_memory_chunks,
        )

    def _prompts_folder(self, settings: Settings) -> Path:
        """Relative folders are read from where rag.properties lives; the default one, when
        that file has none beside it (a Datafari rag.properties), is the shipped templates."""
        folder = Path(settings.prompt.templates_dir)
        if folder.is_absolute():
            return folder
        beside = self.config.path.parent / folder
        if beside.is_dir() or settings.prompt.templates_dir != DEFAULT_PROMPTS:
            return beside
        return next((path for path in SHIPPED_PROMPTS if path.is_dir()), beside)

    def _client(self, upstream: str) -> httpx.AsyncClient:
        if upstream not in self._pools:
            raise RuntimeError("Runtime.start() must run before requests are served")
        return self._pools[upstream]
