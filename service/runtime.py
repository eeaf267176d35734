"""What the service keeps between requests: the config, the prompt templates, one connection
pool per upstream, the circuit breakers, what is known of Solr's nodes, the extraction worker.

Each request takes its own view of these (`service.snapshot.Snapshot`): its settings and the
clients bound to them.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx

from service.chains import PromptLibrary, PromptStore
from service.config import ConfigStore, Settings
from service.config.settings import key_field
from service.conversations import Memories
from service.errors import ConfigError, PromptTemplateError, SolrLayoutError
from service.ingest.sandbox import Extractor
from service.llm import ChatClient, CircuitBreaker, EmbeddingsClient, LLMOptions
from service.llm.budget import CallBudget
from service.llm.embeddings import embeddings_client
from service.llm.queue import LlmLoads
from service.retrieval import SolrClient
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.in_memory import PassageVectors
from service.retrieval.layout import verify_layout
from service.retrieval.nodes import SolrNodes
from service.retrieval.solr import SchemaCache
from service.transport import upstream_pool

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
    """The long-lived resources every request shares.

    `transport`: an httpx transport for every upstream (tests: an ASGI app in the process, no
    sockets); the default is the network.
    """

    def __init__(
        self, config_path: Path, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = ConfigStore(config_path)
        self._transport = transport
        self._started = False
        self.prompts = PromptStore(self._prompts_folder(self.config.current()))
        # one connection pool per upstream: httpcore checks every pooled connection on each
        # request, so one shared pool makes Solr calls pay for the LLM's connections too
        self._pools: dict[str, httpx.AsyncClient] = {}
        # one breaker per upstream API, shared by every request (see llm.circuit.*)
        self._breakers: dict[tuple[str, str, int, float], CircuitBreaker] = {}
        # each LLM endpoint's calls in flight, queue and pace, for the door's admission
        self.llm_loads = LlmLoads(lambda: self.pool("llm"))
        # what is known of each Solr node (up, resting after a failure), shared by every
        # request; a new one when solr.url, solr.nodes.discover or solr.zk.hosts change
        self._solr_nodes: tuple[tuple[str, bool, str, str], SolrNodes, SchemaCache] | None = None
        # who embeds the passages and questions (solr.embeddings.mode; auto asks Solr once),
        # a new one when what it depends on changes
        self._embedding_mode: tuple[tuple[str, ...], EmbeddingMode] | None = None
        # uploaded files are extracted in a worker process (started on first use)
        self.extractor = Extractor()
        # InMemory vector search's passage vectors, by model and text (bounded LRU)
        self.passage_vectors = PassageVectors()
        # Datafari 7's memoryId: each caller's last turns, in this process (bounded)
        self.memories = Memories()

    async def start(self) -> None:
        """Opens the connection pools; checks Solr's layout (solr.startup.check), raising
        SolrLayoutError when it is unusable."""
        self._started = True
        settings = self.settings()
        if settings.solr.startup_check:
            try:
                await verify_layout(
                    self.solr(settings),
                    settings.solr,
                    embeddings=self._plain_embeddings(settings),
                    cache=settings.cache.enabled,
                    security=settings.security.model if settings.security.enabled else None,
                    rescore=settings.retrieval.knn_rescore,
                )
                await self.embedding_mode(settings).verify(self.solr(settings))
            except SolrLayoutError:
                await self.stop()
                raise

    async def stop(self) -> None:
        self.extractor.close()
        self._started = False
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()

    def settings(self) -> Settings:
        return self.config.current()

    def solr(self, settings: Settings) -> SolrClient:
        nodes, schemas = self._known_solr(settings)
        return SolrClient.of(settings.solr, self.pool, nodes=nodes, schemas=schemas)

    def solr_nodes(self, settings: Settings) -> SolrNodes:
        return self._known_solr(settings)[0]

    def _known_solr(self, settings: Settings) -> tuple[SolrNodes, SchemaCache]:
        """What is known of the settings' Solr: its nodes and its collections' fields; known
        anew when solr.url, solr.nodes.discover or solr.zk.hosts change."""
        layout = settings.solr
        key = (layout.url, layout.discover_nodes, layout.zk_hosts, layout.zk_digest)
        if self._solr_nodes is None or self._solr_nodes[0] != key:
            self._solr_nodes = key, SolrNodes.configured(layout), SchemaCache()
        return self._solr_nodes[1], self._solr_nodes[2]

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
        model_chosen_by_caller: bool = False,
        calls: CallBudget | None = None,
    ) -> ChatClient:
        """The LLM of `settings` (a request's options applied: its model, max_tokens,
        temperature), with a call budget of its own; `model_chosen_by_caller`: the request
        named the model, so the LLM's 404 for it is the caller's error."""
        return ChatClient(
            self.pool("llm"),
            LLMOptions(
                endpoint=settings.llm.endpoint,
                model=settings.llm.model,
                token=settings.llm.token.get_secret_value(),
                temperature=settings.llm.temperature,
                max_tokens=settings.llm.max_tokens,
                connect_timeout=settings.llm.timeout_connect,
                read_timeout=settings.llm.timeout_read,
                retries=settings.llm.retries,
                model_chosen_by_caller=model_chosen_by_caller,
            ),
            self.breaker(settings, "llm", settings.llm.endpoint),
            calls or CallBudget(settings.llm.max_calls),  # a client is built per request
            self.llm_loads.of(settings.llm.endpoint),
        )

    def embeddings(self, settings: Settings, *, model: str | None = None) -> EmbeddingsClient:
        breaker = self.breaker(settings, "embeddings", settings.embeddings.endpoint)
        return embeddings_client(self.pool("embeddings"), settings, model=model, breaker=breaker)

    def _plain_embeddings(self, settings: Settings) -> EmbeddingsClient:
        """The embeddings API without its breaker or retries: a check's failure is not the
        traffic's, and a check does not insist."""
        return embeddings_client(self.pool("embeddings"), settings, retries=0)

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
            PromptLibrary(self._prompts_folder(settings))  # read anew: a check, not a cache
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
                    rescore=settings.retrieval.knn_rescore,
                )
                await EmbeddingMode.of(settings).verify(self.solr(settings))
            except SolrLayoutError as error:
                raise ConfigError(str(error)) from None

    def prompt_library(self, settings: Settings) -> PromptLibrary:
        return self.prompts.current(self._prompts_folder(settings))

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

    def pool(self, upstream: str, *, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
        """The connection pool of one upstream (solr, llm, embeddings, rerank...), opened on
        first use; `verify`: its TLS (a Solr's own CA and client certificate: a pool's name
        says which, see service.retrieval.access.Pools)."""
        if not self._started:
            raise RuntimeError("Runtime.start() must run before requests are served")
        if upstream not in self._pools:
            self._pools[upstream] = upstream_pool(verify=verify, transport=self._transport)
        return self._pools[upstream]
