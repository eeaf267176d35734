"""One request's view of the service: the settings in force when it arrived (with its own
options applied: options.py, RequestOptions), and the clients bound to them, built on first use
from the runtime's long-lived pools, breakers and caches.

    >>> snapshot = Snapshot(runtime)                       # FastAPI: Depends(request_snapshot)
    >>> reply = await ask(snapshot, query)   # service.rag.assemble: overridden(query.options)

A settings reload in the middle of a request does not reach it: every stage and client of one
request sees one snapshot.

The snapshot sits above what it builds (the runtime, the clients of llm/ and retrieval/, the
answer cache, the conversations, ingest's indexer) and below what works with it (rag/, agents/,
actions/, the job runner, the API): what it holds is handed to it (Datafari's custom tools,
read with the config) or defined here (the request's options), never imported from above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

from service.cache import AnswerCache
from service.chains import PromptLibrary
from service.config import Settings
from service.config.custom_tools import CustomTool
from service.conversations.store import ConversationStore
from service.ingest.indexer import Indexer, indexer_for
from service.ingest.partitions import Partitions
from service.llm import ChatClient, EmbeddingsClient
from service.llm.budget import CallBudget
from service.llm.rerank import RerankClient, rerank_client
from service.retrieval import Retriever, Scope, SolrClient, VectorRetriever
from service.retrieval.embedding_mode import EmbeddingMode
from service.retrieval.facet_filter import documents_matching
from service.retrieval.factory import build_retriever, vector_retriever
from service.retrieval.in_memory import InMemorySearch
from service.runtime import Runtime
from service.snapshot.options import DEFAULTS, RequestOptions

MAX_FILES = 100  # chunking.maxFiles' upper bound


class Snapshot:
    """The settings of one request and its clients (each built once, when first used)."""

    def __init__(
        self,
        runtime: Runtime,
        settings: Settings | None = None,
        options: RequestOptions = DEFAULTS,
        custom_tools: Mapping[str, CustomTool] | None = None,
        calls: CallBudget | None = None,
    ) -> None:
        self._runtime = runtime
        self._calls = calls  # the request's call budget, when this is one of its snapshots
        self._base = settings or runtime.settings()
        self.options = options
        self.settings = options.apply(self._base)
        # Datafari's custom agent's tools, read and checked with the config (not per request)
        self.custom_tools = runtime.config.custom_tools() if custom_tools is None else custom_tools

    def overridden(self, options: RequestOptions) -> Snapshot:
        """This snapshot with a request's own options (its model, retrieval, top k...)."""
        if options == self.options:
            return self
        # one request, one call budget: its options' snapshot spends the calls this one does
        # (an agent's answer, after its turns, made with the conversation's history)
        return Snapshot(self._runtime, self._base, options, self.custom_tools, self.calls)

    @cached_property
    def calls(self) -> CallBudget:
        """The request's LLM call budget (llm.max.calls.per.request), shared by the
        snapshots its options make of this one."""
        return self._calls or CallBudget(self.settings.llm.max_calls)

    @cached_property
    def solr(self) -> SolrClient:
        return self._runtime.solr(self.settings)

    @cached_property
    def conversations(self) -> ConversationStore:
        """The conversations (and memories) kept in Solr for their owners."""
        return ConversationStore(self.solr, self.settings.conversations)

    @cached_property
    def llm(self) -> ChatClient:
        """The configured LLM, or the model, max_tokens and temperature the request names;
        with the request's own call budget."""
        return self._runtime.llm(
            self.settings, model_chosen_by_caller=self.options.names_model, calls=self.calls
        )

    @cached_property
    def embeddings(self) -> EmbeddingsClient:
        return self._runtime.embeddings(self.settings)

    @cached_property
    def prompts(self) -> PromptLibrary:
        return self._runtime.prompt_library(self.settings)

    @cached_property
    def embedding_mode(self) -> EmbeddingMode:
        """Whether Solr or the service embeds questions (solr.embeddings.mode)."""
        return self._runtime.embedding_mode(self.settings)

    @cached_property
    def answer_cache(self) -> AnswerCache | None:
        """The semantic answer cache (cache.enabled), or None."""
        if not self.settings.cache.enabled:
            return None
        settings = self.settings
        return AnswerCache(self.solr, self.embeddings, settings.solr, settings.cache)

    @cached_property
    def in_memory(self) -> InMemorySearch | None:
        """InMemory vector search (rag.enable.vector.search), its vectors shared by every
        request; None when off."""
        settings = self.settings
        if not settings.retrieval.in_memory:
            return None
        return InMemorySearch(
            self._runtime.passage_vectors,
            size=settings.embeddings.passage_size,
            overlap=settings.embeddings.passage_overlap,
            max_chunks=settings.retrieval.in_memory_chunks,
        )

    @cached_property
    def rerank(self) -> RerankClient | None:
        """The rerank API (rerank.enabled), or None."""
        if not self.settings.rerank.enabled:
            return None
        settings = self.settings
        breaker = self._runtime.breaker(settings, "rerank", settings.rerank.endpoint)
        return rerank_client(self._runtime.pool("rerank"), settings, breaker=breaker)

    def retriever(self, scope: Scope) -> Retriever:
        """The configured retrieval within `scope`, the question embedded as configured."""
        settings = self.settings
        return build_retriever(
            settings.retrieval,
            settings.solr,
            self.solr,
            self.embeddings,
            scope=scope,
            mode=self.embedding_mode,
            in_memory=self.in_memory,
            reads=settings.embeddings.reads(),
        )

    async def narrowed(
        self, scope: Scope, ids: Sequence[str] | None = None, queries: Sequence[str] = ()
    ) -> Scope:
        """`scope` narrowed to the documents among `ids` (None: any) that pass every filter
        query (a facet's, read by service.retrieval.facet_filter; any other refused): what
        Datafari 7's `filters`, its search API's `fq` and a custom tool's filters leave."""
        if ids is None and not queries:
            return scope
        if not queries:
            return scope.within(ids or ())
        layout = self.settings.solr
        documents = await documents_matching(
            self.solr, layout.documents_collection, layout.documents_map, scope, queries, ids
        )
        return scope.within(documents)

    def index_retriever(
        self, scope: Scope, count: int, method: str = "", *, operator: str = ""
    ) -> Retriever:
        """The configured retrieval (or `method`'s: bm25, vector, hybrid), finding up to
        `count` documents or passages in `scope` (at most MAX_FILES documents by BM25), its
        words joined by `operator` (AND, OR; "" the configured rag.operator)."""
        changes: dict[str, object] = {
            "solr.topK": count,
            "chunking.maxFiles": min(count, MAX_FILES),
        }
        if method:
            changes["retrieval.method"] = method
        if operator:
            changes["rag.operator"] = operator
        sized = self.settings.overridden(changes)
        return build_retriever(
            sized.retrieval,
            sized.solr,
            self.solr,
            self.embeddings,
            scope=scope,
            mode=self.embedding_mode,
            reads=sized.embeddings.reads(),
        )

    def vector_retriever(
        self, *, model: str | None, top_k: int | None, scope: Scope
    ) -> VectorRetriever:
        """kNN over the passages, with the embedding model a caller may name (then the
        service embeds the question: Solr's plugin knows one model)."""
        settings = self.settings
        own_model = model is None or model == settings.embeddings.model
        return vector_retriever(
            settings.solr,
            self.solr,
            self._runtime.embeddings(settings, model=model) if model else self.embeddings,
            top_k=top_k or settings.retrieval.top_k,
            scope=scope,
            mode=self.embedding_mode if own_model else None,
            depth=settings.retrieval.knn_depth,
            rescore=settings.retrieval.knn_rescore,
            exact_max=settings.retrieval.knn_exact_max,
        )

    @cached_property
    def indexer(self) -> Indexer:
        return indexer_for(self.settings, self.solr, self.embeddings, mode=self.embedding_mode)

    @cached_property
    def partitions(self) -> Partitions:
        return Partitions(self.solr, self.indexer, self.settings.solr.documents_collection)
