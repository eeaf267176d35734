"""OpenTelemetry traces (issue 85), without sockets: the configuration read from the keys and
the OTEL_* variables, no span and no traceparent when tracing is off, and when it is on the
spans a question makes, nested, named as the conventions say, with nothing a person wrote.

The LLM is the test server's app reached through httpx's ASGI transport; spans go to the
SDK's in-memory exporter (tests/service/test_tracing.py sends them to a real collector)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service import tracing
from service.chains import Question
from service.config.settings import ObservabilitySettings, Settings
from service.errors import ConfigError, UpstreamBadResponse
from service.llm import ChatClient, LLMOptions
from service.observability import request_headers, request_id_var
from service.rag.pipeline import Pipeline
from service.rag.reply import Reply
from service.rag.request import RagQuery
from service.rag.stages import RagState, StageResult
from service.tracing._config import TracingConfig, propagators_refused
from service.tracing._state import QuietExporter
from testing.llm_server import LLMScript, Step, create_llm_app
from testing.servers import dead_address
from testing.service import write_properties

QUESTION = "Who kept the lighthouse of Alexandria?"
ON = ObservabilitySettings(**{"observability.tracing.enabled": True})
OFF = ObservabilitySettings()


def config(env: dict[str, str], keys: ObservabilitySettings = OFF) -> TracingConfig:
    return TracingConfig.of(keys, env)


# -- what turns it on, and where spans go -------------------------------------------------------


def test_tracing_is_off_unless_a_key_or_an_otlp_endpoint_says_so() -> None:
    assert not config({}).on
    assert config({}, ON).on
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    found = config(endpoint)
    assert found.on and found.endpoint is None  # the exporter reads the variable itself
    assert found.where == "http://collector:4318"


def test_the_sdk_disabled_or_no_exporter_turns_it_off_whatever_the_keys_say() -> None:
    assert not config({"OTEL_SDK_DISABLED": "true"}, ON).on
    assert not config({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}).on


def test_the_keys_endpoint_gets_otlp_https_traces_path_but_not_grpcs() -> None:
    http = ObservabilitySettings(
        **{"observability.tracing.enabled": True, "observability.tracing.endpoint": "http://c:4318"}
    )
    assert config({}, http).endpoint == "http://c:4318/v1/traces"
    assert config({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, http).endpoint == "http://c:4318"
    assert config({}, ON).endpoint is None  # the exporter's default, localhost


def test_a_protocol_or_exporter_no_one_sends_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="use http/protobuf"):
        config({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ON)
    with pytest.raises(ConfigError, match="OTLP only"):
        config({"OTEL_TRACES_EXPORTER": "zipkin"}, ON)


def test_the_sampler_variable_wins_over_the_ratio_and_capture_is_an_opt_in() -> None:
    assert config({}, ON).ratio == 1.0
    assert config({"OTEL_TRACES_SAMPLER": "always_off"}, ON).ratio is None
    assert not config({}, ON).capture_content
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    assert config(capture, ON).capture_content


def test_a_collector_url_with_a_login_is_refused_naming_where_credentials_go() -> None:
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_HEADERS"):
        Settings.of({"observability.tracing.endpoint": "http://user:secret@collector:4318"})


# -- off: nothing is made ----------------------------------------------------------------------


@pytest.fixture
def script() -> LLMScript:
    return LLMScript()


@pytest.fixture
async def llm(script: LLMScript) -> Iterator[ChatClient]:
    transport = httpx.ASGITransport(app=create_llm_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        yield ChatClient(http, LLMOptions(endpoint="http://llm/v1/", model="test-model"))


async def test_off_no_span_is_made_and_no_traceparent_is_sent(
    llm: ChatClient, script: LLMScript
) -> None:
    assert not tracing.enabled()
    # every helper hands back the same do-nothing object: no span, no attributes built
    assert tracing.span("x") is tracing.NOTHING
    assert tracing.stage("retrieve") is tracing.NOTHING
    assert tracing.solr_call("POST", "/FileShare/select") is tracing.NOTHING
    assert tracing.llm_call("chat/completions", {}, "http://llm/v1/") is tracing.NO_CALL
    assert tracing.NO_CALL.sending() is tracing.NO_CALL.recording() is tracing.NOTHING
    assert tracing.server("POST", {}, {}) is tracing.NOTHING
    assert tracing.current() is tracing.NO_SPAN
    token = request_id_var.set("abc123")
    try:
        assert request_headers() == {"X-Request-Id": "abc123"}
        await llm.complete([_user(QUESTION)])
    finally:
        request_id_var.reset(token)
    sent = script.requests[-1].headers
    assert sent["x-request-id"] == "abc123"
    assert "traceparent" not in sent


# -- on: the spans of a question ---------------------------------------------------------------


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, its spans kept in memory (read once it is off again)."""
    memory = InMemorySpanExporter()
    with tracing.installed(ON, {}, exporter=memory):
        yield memory
    assert not tracing.enabled()


class Asks:
    """A stage that asks the LLM, and makes the reply."""

    name = "chain"
    calls_llm = True
    calls_kept = 1

    def __init__(self, llm: ChatClient) -> None:
        self.llm = llm

    def wanted(self, state: RagState) -> bool:
        return True

    async def run(self, state: RagState) -> StageResult:
        await self.llm.complete([_user(state.query.query)])
        return Reply(None, None, state.timings, state.started, 0.0)  # type: ignore[arg-type]


async def test_on_each_stage_and_llm_call_is_a_span_of_the_requests_trace(
    llm: ChatClient, script: LLMScript, spans: InMemorySpanExporter
) -> None:
    def begin(query: RagQuery) -> RagState:
        return RagState(query=query, question=Question(text=query.query), search_query="")

    pipeline = Pipeline(Settings(), llm, begin, [Asks(llm)])
    with tracing.server("POST", {}, {"http.request.method": "POST"}) as request:
        await pipeline.run(RagQuery(QUESTION))
        trace_id = request.trace_id
    tracing_off_and_flushed = _finished(spans)
    names = {span.name: span for span in tracing_off_and_flushed}
    assert set(names) == {"POST", "stage chain", "chat test-model"}
    assert {format(span.context.trace_id, "032x") for span in names.values()} == {trace_id}
    assert names["stage chain"].parent.span_id == names["POST"].context.span_id
    chat = names["chat test-model"]
    assert chat.parent.span_id == names["stage chain"].context.span_id
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "test-model"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert chat.attributes["gen_ai.usage.output_tokens"] == 7
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    # the LLM was sent the LLM span's traceparent: its own spans would be that span's children
    traceparent = script.requests[-1].headers["traceparent"]
    assert traceparent.startswith(f"00-{trace_id}-{chat.context.span_id:016x}-")
    _nothing_said(tracing_off_and_flushed)


async def test_a_streamed_answers_span_lasts_until_it_is_read(
    llm: ChatClient, script: LLMScript, spans: InMemorySpanExporter
) -> None:
    with tracing.span("question"):
        stream = llm.stream([_user(QUESTION)])
        text = "".join([piece async for piece in stream])
    assert text
    (chat,) = [span for span in _finished(spans) if span.name.startswith("chat")]
    assert chat.attributes["gen_ai.request.stream"] is True
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert (
        script.requests[-1].headers["traceparent"].split("-")[2] == f"{chat.context.span_id:016x}"
    )
    _nothing_said(_finished(spans))


async def test_a_failure_is_marked_by_its_type_never_its_message(
    llm: ChatClient, script: LLMScript, spans: InMemorySpanExporter
) -> None:
    script.then(Step(content=f"no room for {QUESTION}", status=400))
    with tracing.span("question"), pytest.raises(UpstreamBadResponse):
        await llm.complete([_user(QUESTION)])
    chat, _ = _finished(spans)
    assert chat.attributes["error.type"] == "UpstreamBadResponse"
    assert chat.status.status_code.name == "ERROR"
    assert not chat.status.description
    _nothing_said([chat])


async def test_content_is_in_the_llm_span_only_when_an_operator_asks(
    llm: ChatClient, script: LLMScript
) -> None:
    memory = InMemorySpanExporter()
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    with tracing.installed(ON, capture, exporter=memory), tracing.span("question"):
        await llm.complete([_user(QUESTION)])
    chat, _ = memory.get_finished_spans()
    assert QUESTION in chat.attributes["gen_ai.input.messages"]
    assert "Test answer" in chat.attributes["gen_ai.output.messages"]


def test_an_incoming_traceparent_is_continued(spans: InMemorySpanExporter) -> None:
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracing.server("GET", {"traceparent": incoming}, {}) as request:
        assert request.trace_id == "0af7651916cd43dd8448eb211c80319c"
        headers: dict[str, str] = {}
        tracing.inject(headers)
    assert headers["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    (served,) = _finished(spans)
    assert served.parent.span_id == 0xB7AD6B7169203331


def test_solr_spans_name_the_collection_and_the_kind_never_the_query(
    spans: InMemorySpanExporter,
) -> None:
    knn = {"params": {"q": "{!knn f=vector topK=10}[0.1,0.2]", "fq": QUESTION}}
    with tracing.span("question"):
        with tracing.solr_call("POST", "/VectorMain/select", knn):
            pass
        with tracing.solr_call("POST", "/FileShare/select", {"params": {"q": QUESTION}}):
            pass
        with tracing.solr_call("POST", "/FileShare/update", None):
            pass
    found = _finished(spans)[:3]
    assert [span.name for span in found] == [
        "solr knn VectorMain",
        "solr select FileShare",
        "solr update FileShare",
    ]
    assert found[0].attributes["db.collection.name"] == "VectorMain"
    assert found[0].attributes["db.operation.name"] == "knn"
    _nothing_said(found)


async def test_a_call_outside_any_traced_work_makes_no_trace_of_its_own(
    llm: ChatClient, script: LLMScript, spans: InMemorySpanExporter
) -> None:
    """A startup check, the jobs' poll every second: no trace each, no traceparent sent."""
    assert tracing.solr_call("POST", "/Jobs/select") is tracing.NOTHING
    assert tracing.stage("retrieve") is tracing.NOTHING
    await llm.complete([_user(QUESTION)])
    assert "traceparent" not in script.requests[-1].headers
    assert _finished(spans) == []


def test_a_collector_that_is_down_is_said_once_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Down(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            raise ConnectionRefusedError("collector:4318")

    quiet = QuietExporter(Down(), "http://collector:4318")
    with caplog.at_level(logging.WARNING, "service.tracing"):
        results = [quiet.export([]) for _ in range(5)]
    assert results == [SpanExportResult.FAILURE] * 5
    said = [r for r in caplog.records if "traces cannot be sent" in r.getMessage()]
    assert len(said) == 1
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in said[0].getMessage()


@contextmanager
def _after_a_failed_batch(exporter: SpanExporter) -> Iterator[None]:
    """Tracing on with `exporter`, its first batch refused, a last span made: stopped when
    the `with` ends."""
    from service.tracing import _state

    with tracing.installed(ON, {}, exporter=exporter):
        installed = _state._installed
        assert installed is not None
        with installed.tracer.start_as_current_span("a question"):
            pass
        assert installed.provider.force_flush(30_000)
        assert installed.exporter.failing
        with installed.tracer.start_as_current_span("the last question"):
            pass
        yield


def test_a_stop_waits_for_no_collector_that_already_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service's stop waited STOP_SECONDS for the last batch even when every batch before
    had failed; now a collector known to be down costs the stop FAILING_STOP_SECONDS at most
    (an answering one still gets its last spans: the test below)."""
    import threading
    import time

    from service.tracing import _state

    release = threading.Event()

    class Hangs(SpanExporter):  # refuses the first batch, then hangs as a dead host does
        calls = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            Hangs.calls += 1
            if Hangs.calls > 1:
                release.wait(60)
            return SpanExportResult.FAILURE

    monkeypatch.setattr(_state, "STOP_SECONDS", 60.0)
    try:
        with _after_a_failed_batch(Hangs()):
            began = time.monotonic()
        assert time.monotonic() - began < 30  # the hanging export's 60 s not waited for
    finally:
        release.set()


def test_a_collector_back_up_still_gets_the_last_spans_at_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch refused once (a collector restarting) leaves `failing` set until the next one
    goes: the stop still gives that next one its (shorter) wait, not none."""
    import time

    from service.tracing import _state

    received: list[str] = []

    class Restarted(SpanExporter):
        calls = 0

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            Restarted.calls += 1
            if Restarted.calls == 1:
                return SpanExportResult.FAILURE
            time.sleep(0.3)  # an answer over the network: not there before the stop waits
            received.extend(span.name for span in spans)
            return SpanExportResult.SUCCESS

    monkeypatch.setattr(_state, "FAILING_STOP_SECONDS", 30.0)  # a slow box's thread start
    with _after_a_failed_batch(Restarted()):
        pass
    assert received == ["the last question"]


def test_only_the_tracer_it_installed_is_taken_off(spans: InMemorySpanExporter) -> None:
    """A second app's stop (tests run several in one process) leaves the tracer of another."""
    assert tracing.enabled()
    with tracing.installed(OFF, {}):
        pass
    assert tracing.enabled()


# -- a hostile caller, a hostile setting, a hostile upstream ------------------------------------


def test_a_callers_tracestate_and_baggage_are_neither_kept_nor_sent_upstream(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the trace is continued: what else a caller writes (tracestate, baggage) never
    reaches Solr or a third party's LLM, and a malformed or huge header logs nothing."""
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    hostile = {
        "traceparent": incoming,
        "tracestate": "gateway=tenant-4711-secret,other=x",
        "baggage": "user=alice,groups=hr",
    }
    with tracing.server("GET", hostile, {}) as request:
        headers: dict[str, str] = {}
        tracing.inject(headers)
    assert request.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert set(headers) == {"traceparent"}
    with caplog.at_level(logging.DEBUG, "opentelemetry"):
        for headers in (
            {"traceparent": incoming, "tracestate": "bad key=" + "x" * 2_000},
            {"traceparent": incoming, "tracestate": ",".join(f"k{i}=v" for i in range(40))},
            {"traceparent": incoming + "-" + " " * 100_000},
            {"traceparent": incoming, "tracestate": "a=" + "b" * 100_000},
        ):
            with tracing.server("GET", headers, {}) as request:
                assert len(request.trace_id) == 32
    assert [r.getMessage()[:80] for r in caplog.records if r.name.startswith("opentelemetry")] == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:p@ss@collector:4318", "http://collector:4318"),  # an @ in the password
        ("https://u:p%40x@collector/v1/traces?token=abc#top", "https://collector/v1/traces"),
        ("http://collector:4318/v1/traces?api_key=abc", "http://collector:4318/v1/traces"),
        ("user:secret@collector:4317", "collector:4317"),  # gRPC's, without a scheme
        ("http://collector:4318", "http://collector:4318"),
    ],
)
def test_the_collector_is_named_without_its_login_or_query(url: str, shown: str) -> None:
    assert tracing.without_login(url) == shown


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_BSP_MAX_QUEUE_SIZE": "0"},
        {"OTEL_BSP_SCHEDULE_DELAY": "-1"},
        {"OTEL_BSP_SCHEDULE_DELAY": "abc"},  # the SDK: a traceback in the log, then 5 s
        {"OTEL_BSP_EXPORT_TIMEOUT": "soon"},
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100000"},  # more than the queue holds
        {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "abc"},
        {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-3"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "file:///etc/passwd"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector:4318"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:secret@collector:4318"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces?token=abc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:99999"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "not a url"},
    ],
)
def test_a_hostile_otel_variable_is_a_config_error_naming_it(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="OTEL_") as refused:
        config(env, ON)
    assert "secret" not in str(refused.value) and "token=abc" not in str(refused.value)


def test_what_the_sdk_refuses_anyway_is_a_config_error_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.tracing import _state

    def refused(config: TracingConfig) -> SpanExporter:
        raise ValueError("Invalid IPv6 URL")

    monkeypatch.setattr(_state, "_exporter", refused)
    with pytest.raises(ConfigError, match="Invalid IPv6 URL"), tracing.installed(ON, {}):
        pass
    assert not tracing.enabled()


@pytest.mark.parametrize(
    "url",
    ["http://collector:4318/v1/traces?token=abc", "http://collector:4318#x", "http://[::1",
     "http://collector:99999", "http://collector:port"],
)  # fmt: skip
def test_a_collector_key_with_a_query_or_no_valid_address_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"observability\.tracing\.endpoint"):
        Settings.of({"observability.tracing.endpoint": url})


def test_the_service_refuses_to_start_on_a_bad_tracing_setting_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`solr-rag serve`: one line (the CLI's ConfigError), not uvicorn's lifespan traceback."""
    from service.api.app import create_app

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    properties = write_properties(
        tmp_path / "rag.properties", {"observability.tracing.enabled": True}
    )
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        create_app(properties)


def test_an_unknown_propagator_is_one_line_naming_the_variable_before_any_import() -> None:
    """OpenTelemetry loads OTEL_PROPAGATORS' propagators when FastAPI imports it: a name no
    package provides was a ValueError's traceback before `solr-rag` could say anything."""
    import subprocess
    import sys

    env = {**os.environ, "OTEL_PROPAGATORS": "tracecontext,bogus"}
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve", "--help"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "OTEL_PROPAGATORS" in done.stderr and "'bogus'" in done.stderr
    assert propagators_refused({"OTEL_PROPAGATORS": " tracecontext , baggage "}) is None
    assert propagators_refused({"OTEL_PROPAGATORS": "none,bogus"}) is None  # none ends it
    assert propagators_refused({}) is None
    # what OpenTelemetry still raises on: a name before `none`, an empty item, a blank value
    for value in ("bogus,none", "tracecontext,", "tracecontext,,baggage", " ", ","):
        assert propagators_refused({"OTEL_PROPAGATORS": value}), value
        assert _otel_refuses(value), value


def _otel_refuses(value: str) -> bool:
    """Whether OpenTelemetry's own import fails on OTEL_PROPAGATORS=value (a fresh process)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import opentelemetry.propagate"],
        env={**os.environ, "OTEL_PROPAGATORS": value}, capture_output=True, timeout=120,
    )  # fmt: skip
    return done.returncode != 0


def test_fastapis_own_telemetry_stays_off_whatever_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's native telemetry (FASTAPI_OTEL_AUTO_CONFIGURE=true with the OTLP endpoint
    this service's tracing reads too) would send url.query (`/search?q=<a question>`) and
    exceptions' messages: the service's own spans are the only ones."""
    from opentelemetry import _logs, metrics, trace
    from starlette.testclient import TestClient

    from service.api.app import create_app

    with dead_address() as nowhere:
        monkeypatch.setenv("FASTAPI_OTEL_AUTO_CONFIGURE", "true")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{nowhere}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
        dead = f"http://{nowhere}"
        properties = write_properties(
            tmp_path / "rag.properties",
            {"solr.url": f"{dead}/solr", "solr.startup.check": False,
             "ai.api.endpoint": f"{dead}/v1/", "ai.embeddings.endpoint": f"{dead}/v1/"},
        )  # fmt: skip
        with TestClient(create_app(properties), raise_server_exceptions=False) as client:
            client.get("/search/vector", params={"q": QUESTION})
    providers = (trace.get_tracer_provider(), metrics.get_meter_provider(),
                 _logs.get_logger_provider())  # fmt: skip
    assert [type(p).__name__ for p in providers] == [
        "ProxyTracerProvider",
        "_ProxyMeterProvider",
        "ProxyLoggerProvider",
    ]


async def test_what_an_upstream_says_of_a_call_is_bounded_in_its_span(
    spans: InMemorySpanExporter,
) -> None:
    """A hostile OpenAI-compatible API (a third party's) cannot grow a span without bound."""
    with tracing.span("question"):
        call = tracing.llm_call("chat/completions", {"model": "m"}, "http://llm/v1/")
        with call:
            call.answered(
                {
                    "model": "m" * 1_000_000,
                    "choices": [{"finish_reason": "x" * 10_000}] * 100_000,
                }
            )
        stream = tracing.llm_call("chat/completions", {"model": "m"}, "http://llm/v1/")
        with stream.recording():
            stream.streamed("", None, "y" * 1_000_000)
    chat, streamed = _finished(spans)[:2]
    assert len(chat.attributes["gen_ai.response.model"]) <= 256
    reasons = chat.attributes["gen_ai.response.finish_reasons"]
    assert len(reasons) <= 16 and all(len(reason) <= 64 for reason in reasons)
    (streamed_reason,) = streamed.attributes["gen_ai.response.finish_reasons"]
    assert len(streamed_reason) <= 64


# -- helpers -----------------------------------------------------------------------------------


def _user(text: str) -> Any:
    from service.llm.types import ChatMessage

    return ChatMessage("user", text)


def _finished(memory: InMemorySpanExporter) -> list[ReadableSpan]:
    """The spans exported so far (the batch processor sends them when tracing stops, or now)."""
    from service.tracing import _state

    installed = _state._installed
    if installed is not None:
        installed.provider.force_flush()
    return list(memory.get_finished_spans())


def _nothing_said(spans: Sequence[ReadableSpan]) -> None:
    """No attribute of any span holds the question, or a word of it."""
    for span in spans:
        for key, value in (span.attributes or {}).items():
            text = str(value)
            assert "lighthouse" not in text.lower(), (span.name, key)
