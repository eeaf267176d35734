"""One trace per question (issue 85), read back from a real collector: Arize Phoenix, installed
from PyPI into its own virtualenv and started once for this module (testing/phoenix.py).

The service runs on a real socket with tracing on (the standard OTEL_* variables, or the
observability.tracing.* keys over gRPC), in front of the real Solr (through a recording proxy),
the model server's embeddings, a rerank API and the recording LLM. Phoenix's REST API then
says what it received: one trace, its spans nested as the question ran, the GenAI attributes on
the LLM's, the response's X-Request-Id its trace id, and not a word of the question anywhere.

Without Phoenix (pip cannot reach PyPI) these are skipped, unless SOLR_RAG_REQUIRE_TRACING=1.
SOLR_RAG_TRACE_SCREENSHOT=docs/images/trace-in-phoenix.png takes docs/operations.md's picture of
the first test's trace in Phoenix's UI (headless Chromium).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testing.llm_server import LLMScript
from testing.phoenix import Phoenix, PhoenixUnavailable, running_phoenix
from testing.rerank_server import RerankScript, create_rerank_app
from testing.servers import dead_address, serve_in_thread
from testing.service import ServiceFactory
from testing.solr_proxy import ProxyLog, create_solr_proxy

QUESTION = "Which island is the small quokka marsupial found on?"
WORDS = ("quokka", "marsupial", "island")  # none of them in any span
SECRETS = ("llm-secret-token", "rerank-secret-token", "Bearer")
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    try:
        with running_phoenix(tmp_path_factory.mktemp("phoenix")) as running:
            yield running
    except PhoenixUnavailable as error:
        if os.environ.get("SOLR_RAG_REQUIRE_TRACING") == "1":
            pytest.fail(f"SOLR_RAG_REQUIRE_TRACING=1 but {error}")
        pytest.skip(f"no Phoenix to trace to: {error}")


@pytest.fixture(scope="module")
def rerank_api() -> Iterator[str]:
    with serve_in_thread(create_rerank_app(RerankScript())) as base:
        yield base


@pytest.fixture
def solr_proxy(solr_url: str) -> Iterator[tuple[str, ProxyLog]]:
    log = ProxyLog()
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        yield f"{base}/solr", log


@pytest.fixture
def quick_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans leave every 100 ms (the SDK's own variable; 5 s by default)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")


def settings(solr: str, rerank_api: str, **more: object) -> dict[str, object]:
    return {
        "solr.url": solr,
        "retrieval.method": "hybrid",
        "rerank.enabled": True,
        "rerank.endpoint": f"{rerank_api}/v1/",
        "rerank.model": "test-reranker",
        "rerank.token": "rerank-secret-token",
        "ai.api.token": "llm-secret-token",
        **more,
    }


def test_one_question_is_one_trace_from_the_request_to_solr_the_models_and_the_llm(
    service: ServiceFactory,
    llm: LLMScript,
    phoenix: Phoenix,
    rerank_api: str,
    solr_proxy: tuple[str, ProxyLog],
    quick_batches: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.otlp_http)  # http/protobuf
    base = service(settings(solr_proxy[0], rerank_api))
    searched_before = len(solr_proxy[1].searches)  # the startup's checks: no trace of theirs
    response = httpx.post(f"{base}/ai/rag", json={"query": QUESTION}, timeout=60)
    assert response.status_code == 200, response.text
    trace_id = response.headers["X-Request-Id"]
    assert TRACE_ID.match(trace_id), trace_id  # a user's report leads to the trace

    spans = Trace(phoenix.trace(trace_id, at_least=1, seconds=30), phoenix, "POST /ai/rag")
    root = spans.root
    assert root["name"] == "POST /ai/rag" and root["parent_id"] is None
    assert root["attributes"]["http.route"] == "/ai/rag"
    assert root["attributes"]["http.response.status_code"] == 200
    spans.assert_whole()

    for stage in ("stage retrieve", "stage rerank", "stage chain"):
        assert spans.named(stage)["parent_id"] == root["context"]["span_id"], stage
    knn = spans.named("solr knn VectorMain")
    assert knn["attributes"]["db.collection.name"] == "VectorMain"
    assert "stage retrieve" in spans.ancestors(knn)
    assert "stage retrieve" in spans.ancestors(spans.starting("solr select "))
    embeddings = spans.starting("embeddings ")
    assert embeddings["attributes"]["gen_ai.operation.name"] == "embeddings"
    assert "stage retrieve" in spans.ancestors(embeddings)
    rerank = spans.named("rerank test-reranker")
    assert spans.ancestors(rerank)[0] == "stage rerank"

    chat = spans.named("chat test-model")
    attributes = chat["attributes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "test-model"
    assert attributes["gen_ai.usage.input_tokens"] == 11
    assert attributes["gen_ai.usage.output_tokens"] == 7
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert attributes["gen_ai.provider.name"] == "openai"
    assert spans.ancestors(chat)[-1] == "POST /ai/rag"

    # the upstreams were sent the trace: each request the span that made it
    sent_llm = llm.requests[-1].headers["traceparent"].split("-")
    assert sent_llm[1] == trace_id
    assert sent_llm[2] in spans.ids_of("chat test-model")
    searches = solr_proxy[1].searches
    assert not any(search.traceparent for search in searches[:searched_before])
    sent_solr = [search.traceparent.split("-") for search in searches[searched_before:]]
    assert sent_solr and all(parts[1] == trace_id for parts in sent_solr)
    assert {parts[2] for parts in sent_solr} <= spans.ids_starting("solr ")

    spans.assert_says_nothing_of(WORDS + SECRETS)
    if shot := os.environ.get("SOLR_RAG_TRACE_SCREENSHOT"):  # docs/operations.md's picture
        phoenix.screenshot(trace_id, chat["context"]["span_id"], Path(shot))


def test_a_streamed_answer_over_grpc_continues_the_callers_trace(
    service: ServiceFactory,
    llm: LLMScript,
    phoenix: Phoenix,
    rerank_api: str,
    solr_url: str,
    quick_batches: None,
) -> None:
    """The keys instead of the variables, OTLP over gRPC, OpenAI's streamed completion, and a
    gateway's traceparent: the service's spans join the caller's trace."""
    keys = {
        "observability.tracing.enabled": True,
        "observability.tracing.endpoint": phoenix.otlp_grpc,
        "observability.tracing.protocol": "grpc",
    }
    base = service(settings(solr_url, rerank_api, **keys))
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    body = {
        "model": "test-model",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
    }
    headers = {"traceparent": f"00-{caller_trace}-{caller_span}-01", "X-Request-Id": "mine-1"}
    with httpx.stream(
        "POST", f"{base}/v1/chat/completions", json=body, headers=headers, timeout=60
    ) as response:
        assert response.status_code == 200
        assert "".join(response.iter_text())
    assert response.headers["X-Request-Id"] == caller_trace  # traced: the trace's id wins

    spans = Trace(phoenix.trace(caller_trace, seconds=30), phoenix, "POST /v1/chat/completions")
    assert spans.root["parent_id"] == caller_span  # the caller's span, outside the service
    spans.assert_whole(parent=caller_span)
    chat = spans.named("chat test-model")
    assert chat["attributes"]["gen_ai.request.stream"] is True
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert llm.requests[-1].headers["traceparent"].split("-")[1] == caller_trace
    spans.assert_says_nothing_of(WORDS + SECRETS)


def test_a_collector_that_is_down_costs_no_answer(
    make_client: Any, llm: LLMScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans leave in the background: a collector nobody listens at is said once in the log;
    the answer is given as ever, its id the trace's."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the exporter gives up sooner
    with dead_address() as nowhere:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{nowhere}")
        client = make_client()
        response = client.post("/ai/rag", json={"query": QUESTION})
    assert response.status_code == 200, response.text
    assert TRACE_ID.match(response.headers["X-Request-Id"])


class Trace:
    """The spans of one trace as Phoenix's REST API lists them, by name and by parent."""

    def __init__(self, spans: list[dict[str, Any]], phoenix: Phoenix, root: str) -> None:
        deadline = time.monotonic() + 30  # the root ends last: its batch may come later
        while not any(span["name"] == root for span in spans) and time.monotonic() < deadline:
            time.sleep(0.5)
            spans = phoenix.spans(spans[0]["context"]["trace_id"]) if spans else spans
        self.spans = spans
        self.by_id = {span["context"]["span_id"]: span for span in spans}
        self.root = self.named(root)

    def named(self, name: str) -> dict[str, Any]:
        found = [span for span in self.spans if span["name"] == name]
        assert found, f"no span {name!r} in {sorted(span['name'] for span in self.spans)}"
        return found[0]

    def starting(self, prefix: str) -> dict[str, Any]:
        found = [span for span in self.spans if span["name"].startswith(prefix)]
        assert found, f"no span {prefix}... in {sorted(span['name'] for span in self.spans)}"
        return found[0]

    def ids_of(self, name: str) -> set[str]:
        return {span["context"]["span_id"] for span in self.spans if span["name"] == name}

    def ids_starting(self, prefix: str) -> set[str]:
        return {s["context"]["span_id"] for s in self.spans if s["name"].startswith(prefix)}

    def ancestors(self, span: dict[str, Any]) -> list[str]:
        """The names of the spans above `span`, nearest first."""
        names = []
        while (parent := self.by_id.get(span["parent_id"] or "")) is not None:
            names.append(parent["name"])
            span = parent
        return names

    def assert_whole(self, parent: str | None = None) -> None:
        """One root (whose parent is `parent`: the caller's span, or none), every other span
        a child of a span of the trace: nothing orphaned, no second trace."""
        roots = [span for span in self.spans if span["parent_id"] not in self.by_id]
        assert [span["name"] for span in roots] == [self.root["name"]]
        assert self.root["parent_id"] == parent

    def assert_says_nothing_of(self, words: tuple[str, ...]) -> None:
        for span in self.spans:
            for key, value in span["attributes"].items():
                said = str(value).lower()
                for word in words:
                    assert word.lower() not in said, (span["name"], key, word)
