"""Prometheus metrics: requests, stage latencies, LLM calls and tokens, documents, upstream
errors. Module-level, like any Prometheus client: one process, one set of counters.

Stages record into these and know nothing of HTTP; `/metrics` (service.api.metrics) exposes
them in Prometheus' text format.

Several worker processes (`solr-rag serve --workers N`): PROMETHEUS_MULTIPROC_DIR, set before
this module is imported, makes every process write its values to files there, and `exposed`
adds them up, so whichever worker is scraped reports the whole service.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.process_collector import ProcessCollector

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
REGISTRY = CollectorRegistry()
if not os.environ.get(MULTIPROCESS_DIR):
    ProcessCollector(registry=REGISTRY)  # one process's CPU and memory: the service's

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter(
    "solr_rag_requests",
    "HTTP requests served, by endpoint (route template) and status.",
    ["endpoint", "method", "status"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "solr_rag_request_seconds",
    "Time to answer an HTTP request (a stream: until its last event).",
    ["endpoint"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
STAGE_SECONDS = Histogram(
    "solr_rag_stage_seconds",
    "Time per pipeline stage of an answer (each stage's name: cache, rewrite, expand, retrieve, "
    "chunk, rerank, grade, chain, grounding), llm (wall time with an LLM call in flight), total.",
    ["stage"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
LLM_CALL_SECONDS = Histogram(
    "solr_rag_llm_call_seconds",
    "Time of one call to the LLM or the embeddings API (a stream: until its last chunk).",
    ["upstream"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
LLM_CALLS = Counter("solr_rag_llm_calls", "LLM calls made for answers.", registry=REGISTRY)
ANSWER_CACHE = Counter(
    "solr_rag_answer_cache",
    "The semantic answer cache: lookups that hit or missed, answers stored, entries evicted.",
    ["result"],
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "solr_rag_llm_tokens", "Tokens the LLM reported, by kind.", ["kind"], registry=REGISTRY
)
DOCUMENTS = Histogram(
    "solr_rag_answer_documents",
    "Documents (or passages' parents) whose text reached the LLM, per answer.",
    buckets=(0, 1, 2, 3, 5, 10, 20, 50),
    registry=REGISTRY,
)
UPSTREAM_ERRORS = Counter(
    "solr_rag_upstream_errors",
    "Failed calls to Solr, the LLM or the embeddings API, by kind.",
    ["upstream", "kind"],
    registry=REGISTRY,
)

VECTOR_SEARCHES = Counter(
    "solr_rag_vector_searches",
    "Vector searches of VectorMain Solr answered, by how: `graph` (HNSW's, knn.depth) or "
    "`exact` (every passage of a scope of at most knn.exact.max passages scored).",
    ["how"],
    registry=REGISTRY,
)
SOLR_FAILOVERS = Counter(
    "solr_rag_solr_failovers",
    "Solr calls sent to another node after one could not be reached or answered 503.",
    registry=REGISTRY,
)
SOLR_NODES = Gauge(
    "solr_rag_solr_nodes",
    "Solr nodes the service knows (solr.url's and the cluster's live ones), by state: up, or "
    "down after a failure (who they are: /health, with the admin token).",
    ["state"],
    registry=REGISTRY,
    multiprocess_mode="mostrecent",  # the latest scrape's count, by any worker
)


def exposed() -> bytes:
    """Every metric, in Prometheus' text format: this process's, or all workers' summed."""
    if not os.environ.get(MULTIPROCESS_DIR):
        return generate_latest(REGISTRY)
    workers = CollectorRegistry()
    MultiProcessCollector(workers)
    return generate_latest(workers)


def observe_answer(
    timings_ms: Mapping[str, float],
    *,
    llm_calls: int,
    prompt_tokens: int,
    completion_tokens: int,
    documents: int,
) -> None:
    for stage, milliseconds in timings_ms.items():
        STAGE_SECONDS.labels(stage).observe(milliseconds / 1000)
    LLM_CALLS.inc(llm_calls)
    LLM_TOKENS.labels("prompt").inc(prompt_tokens)
    LLM_TOKENS.labels("completion").inc(completion_tokens)
    DOCUMENTS.observe(documents)


def upstream_error(upstream: str, kind: str) -> None:
    """`upstream`: solr | llm | embeddings; `kind`: unavailable | timeout | bad_response |
    refused (Solr's 401/403, or TLS)."""
    UPSTREAM_ERRORS.labels(upstream, kind).inc()
