"""Hostile clients (issue 14): no 5xx from bad input, no request fan-out, no anonymous outage.

Every test replays an attack that worked before, against the real Solr, the project's model
server or the recording LLM server, over the service's real HTTP stack.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.api.app import create_app
from service.api.redirects import relative
from service.models import extractive
from testing.llm_server import LLMScript, Step
from testing.servers import serve_in_thread
from testing.service import ADMIN_TOKEN, ClientFactory, write_properties
from tests.service.test_streaming import SAID

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
RELAY = {"openai.passthrough.enabled": True}


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def assert_error_shape(response: httpx.Response) -> None:
    """A documented error: OpenAI's shape under /v1/, Datafari's envelope elsewhere."""
    assert response.headers.get("x-request-id"), response.request.url
    body = response.json()
    if response.request.url.path.startswith("/v1/"):
        assert set(body["error"]) >= {"message", "type", "code"}, body
    else:  # every other path, an unknown one too
        assert body["status"] == "ERROR", body
        assert body["content"]["code"] == str(response.status_code), body
        assert set(body["content"]) == {"code", "label", "message", "reason"}, body


# -- availability: one client cannot trip what all share ---------------------------------------


def test_a_huge_citation_number_does_not_crash_the_model_server(model_server_url: str) -> None:
    prompt = f"######\n[{'9' * 5000}] A title\nSome text about lamps.\n######\nQuestion: lamps?"
    response = httpx.post(
        f"{model_server_url}/v1/chat/completions",
        json={"model": "extractive", "messages": ask(prompt)},
        timeout=30,
    )
    assert response.status_code == 200, response.text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        alphabet=st.one_of(st.sampled_from("[]0123456789#\n Question:"), st.characters()),
        max_size=400,
    )
)
def test_the_extractive_answerer_answers_any_prompt(prompt: str) -> None:
    assert isinstance(extractive.answer(prompt), str)


def test_relaying_is_off_unless_configured(make_client: ClientFactory, llm: LLMScript) -> None:
    for_the_llm = {"messages": ask("hi"), "index_name": ""}  # no retrieval
    response = make_client().post("/v1/chat/completions", json=for_the_llm)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "passthrough_disabled"
    assert llm.requests == []


def test_llm_500s_provoked_by_a_client_do_not_open_the_breaker(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({**RELAY, "llm.circuit.failures": 2, "llm.circuit.cooldown": 30})
    llm.then(*[Step(content="I choke on this prompt", status=500) for _ in range(5)])
    for _ in range(5):
        relayed = client.post(
            "/v1/chat/completions", json={"messages": ask("[999]"), "index_name": ""}
        )
        assert relayed.status_code == 500  # the relay passes the LLM's answer on, as it is
    answer = client.post("/ai/rag", json={"query": "lighthouse"})
    assert answer.status_code == 200, answer.text
    assert client.get("/health/ready").status_code == 200


def test_the_relay_needs_the_api_key_like_everything_else(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({**RELAY, "api.keys": "k1"})
    for_the_llm = {"messages": ask("hi"), "index_name": ""}
    refused = client.post("/v1/chat/completions", json=for_the_llm)
    assert refused.status_code == 401
    allowed = client.post("/v1/chat/completions", json=for_the_llm, headers={"X-API-Key": "k1"})
    assert allowed.status_code == 200
    assert len(llm.requests) == 1


def test_the_llm_and_the_embeddings_have_a_breaker_each_on_one_endpoint(
    make_client: ClientFactory, model_server_url: str
) -> None:
    endpoint = f"{model_server_url}/v1/"
    client = make_client({"ai.api.endpoint": endpoint, "ai.embeddings.endpoint": endpoint})
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    settings_now = runtime.settings()
    assert runtime.llm(settings_now).breaker is not runtime.embeddings(settings_now).breaker
    assert runtime.llm(settings_now).breaker is runtime.llm(settings_now).breaker


def test_invented_methods_do_not_mint_metric_series(client: TestClient) -> None:
    for number in range(30):
        client.request(f"X{number}INVENT", "/ai/rag")
    metrics = client.get("/metrics").text
    assert "X1INVENT" not in metrics
    assert 'method="other"' in metrics


# -- fan-out: what a request may cost is bounded -----------------------------------------------


def test_a_huge_system_message_is_refused_before_any_llm_call(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"prompt.chunking.strategy": "refine"})
    messages = [{"role": "system", "content": "Be thorough. " * 3000}, *ask("lighthouse")]
    response = client.post(
        "/v1/chat/completions", json={"messages": messages, "index_name": "FileShare"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert llm.requests == []


@pytest.mark.parametrize("history_chars", [20_000, 39_700])
def test_a_history_that_leaves_no_room_is_a_bad_request(
    make_client: ClientFactory, llm: LLMScript, history_chars: int
) -> None:
    client = make_client({"chat.memory.enabled": True, "chat.memory.history.size": 6})
    per_message = history_chars // 6 if history_chars > 20_000 else history_chars
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": "x" * per_message}
        for n in range(6)
    ]
    response = client.post("/ai/rag", json={"query": "lighthouse", "history": history})
    assert response.status_code == 400, response.text
    content = response.json()["content"]
    assert content["label"] == "ragBadRequest"
    assert "history" in content["reason"]
    assert llm.requests == []


def chain_client(
    make_client: ClientFactory, strategy: str, *, chunk: int, limit: int = 16
) -> TestClient:
    """Requests of at most 2,000 characters, short answers: many packs per document."""
    return make_client(
        {
            "prompt.chunking.strategy": strategy,
            "prompt.max.request.size": 2000,
            "chunking.chunk.size": chunk,
            "llm.max.calls.per.request": limit,
            "llm.maxTokens": 50,
        }
    )


@pytest.fixture
def long_titled(make_client: ClientFactory) -> Iterator[TestClient]:
    """A document with a 1,000-character title and 20,000 characters of text."""
    admin = make_client()
    document = {
        "id": "hostile-long-title",
        "title": "Quartzite " * 100,
        "content": "The quartzite survey measured every ridge. " * 465,
    }
    admin.post("/documents", json={"documents": [document]}, headers=AUTH).raise_for_status()
    yield admin
    admin.delete("/documents/hostile-long-title", headers=AUTH)


@pytest.mark.parametrize("strategy", ["refine", "mapreduce"])
def test_a_long_title_costs_a_bounded_number_of_calls(
    make_client: ClientFactory, long_titled: TestClient, llm: LLMScript, strategy: str
) -> None:
    client = chain_client(make_client, strategy, chunk=500)
    response = client.post("/ai/rag", json={"query": "quartzite", "id": "hostile-long-title"})
    assert response.status_code == 200, response.text
    assert 1 < len(llm.requests) <= 16  # llm.max.calls.per.request, by default
    assert response.json()["usage"]["llm_calls"] == len(llm.requests)
    assert all(request.size <= 2000 for request in llm.requests)


@pytest.mark.parametrize(("strategy", "limit"), [("refine", 3), ("mapreduce", 4)])
def test_the_chains_plan_within_the_call_limit(
    make_client: ClientFactory, llm: LLMScript, strategy: str, limit: int
) -> None:
    client = chain_client(make_client, strategy, chunk=300, limit=limit)
    llm.answer = lambda request: "A partial answer [1]."
    response = client.post("/ai/rag", json={"query": "turbine", "id": "turbine-manual"})
    assert response.status_code == 200, response.text
    assert 1 < len(llm.requests) <= limit
    sent = " ".join(request.prompt for request in llm.requests)
    assert "Step 24 of the wind turbine" not in sent  # the tail was left out, not sent


def test_a_summary_that_needs_more_calls_than_allowed_is_refused_before_any_call(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(
        {
            "ai.enable.summarization": True,
            "prompt.max.request.size": 1000,
            "chunking.chunk.size": 300,
            "llm.max.calls.per.request": 4,
        }
    )
    response = client.post("/ai/summarize", json={"id": "turbine-manual"})
    assert response.status_code == 400, response.text
    content = response.json()["content"]
    assert content["label"] == "summarizationBadRequest"
    assert "llm.max.calls.per.request" in content["reason"]
    assert llm.requests == []


# -- bad input never yields a 5xx --------------------------------------------------------------

DEEP = b"[" * 50_000 + b"]" * 50_000
NAN_TEMPERATURE = b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'
HUGE_INT = b'{"query": "lighthouse", "id": ' + b"9" * 5000 + b"}"
HUGE_FLOAT = b'{"query": "lighthouse", "lang": 1e400}'
SURROGATE_QUERY = b'{"query": "light\\ud800house"}'
SURROGATE_MODEL = (
    b'{"model": "m\\udfff", "messages": [{"role": "user", "content": "x"}], '
    b'"index_name": "FileShare"}'
)
SURROGATE_CONTENT = b'{"messages": [{"role": "user", "content": "\\ud800"}], "index_name": "bm25"}'
ODD_UNICODE = "\u202e\u200b\ufeff" + "\u0301" * 5000 + "𝔩𝔦𝔤𝔥𝔱\U0010ffff"

BODIES: list[tuple[str, bytes | str | None, str]] = [
    ("deep nesting", DEEP, "application/json"),
    ("NaN", NAN_TEMPERATURE, "application/json"),
    ("Infinity", b'{"query": Infinity, "temperature": -Infinity}', "application/json"),
    ("a 5,000-digit number", HUGE_INT, "application/json"),
    ("1e400", HUGE_FLOAT, "application/json"),
    ("a lone surrogate in the query", SURROGATE_QUERY, "application/json"),
    ("a lone surrogate in the model", SURROGATE_MODEL, "application/json"),
    ("a lone surrogate in the content", SURROGATE_CONTENT, "application/json"),
    ("odd Unicode", json.dumps({"query": ODD_UNICODE, "messages": ask(ODD_UNICODE)}), "a/b"),
    ("not JSON", b"{'query': 'x',", "application/json"),
    ("null", b"null", "application/json"),
    ("a list", b'[{"query": "x"}]', "application/json"),
    ("wrong types", b'{"query": ["x"], "history": "y", "messages": 3, "id": {}}', "text/plain"),
    ("empty", b"", "application/json"),
    ("XML", b"<query>x</query>", "application/xml"),
    ("a form", b"query=x&history=y", "application/x-www-form-urlencoded"),
    ("broken multipart", b"--b\r\nContent-Disposition: form", "multipart/form-data; boundary=b"),
    ("binary", bytes(range(256)) * 20, "application/octet-stream"),
    ("control characters", json.dumps({"query": "\x00\x1b[31m\r\n\t\x7f"}), "application/json"),
    ("a huge string", json.dumps({"query": "lamp " * 200_000}), "application/json"),
]

ROUTES = [
    ("POST", "/ai/rag"),
    ("POST", "/ai/summarize"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/documents"),
    ("POST", "/documents/files"),
    ("PATCH", "/admin/config"),
    ("POST", "/admin/test-connection"),
]

PROBES = [
    ("GET", "/static/%00"),
    ("GET", "/static/..%2F..%2Fpyproject.toml"),
    ("GET", "/search/vector?queryrag=lamp&model=extractive"),
    ("GET", "/search/vector?queryrag=%00%ff&topK=99999999999999999999999"),
    ("GET", "/search/vector?q=" + "%ED%A0%80" * 3),
    ("DELETE", "/documents/%00"),
    ("GET", "/ai/rag"),
    ("OPTIONS", "/v1/chat/completions"),
    ("GET", "/v1/models/%00"),
    ("FOO", "/ai/rag"),
    ("GET", "/health?x=" + "%0A" * 100),
]


@pytest.fixture
def hostile(make_client: ClientFactory) -> TestClient:
    return make_client({"ai.enable.summarization": True, "chat.memory.enabled": True, **RELAY})


def assert_documented(client: TestClient, method: str, path: str, **options: object) -> None:
    """The request is answered below 500, and an error in the documented shape."""
    response = client.request(method, path, **options)  # type: ignore[arg-type]
    assert response.status_code < 500, (method, path, response.status_code, response.text)
    if response.status_code >= 400:
        assert_error_shape(response)


@pytest.mark.parametrize(("what", "body", "content_type"), BODIES, ids=[b[0] for b in BODIES])
def test_hostile_bodies_get_a_documented_4xx_everywhere(
    hostile: TestClient, what: str, body: bytes | str | None, content_type: str
) -> None:
    for method, path in ROUTES:
        headers = {"Content-Type": content_type, **AUTH}
        assert_documented(hostile, method, path, content=body, headers=headers)


@pytest.mark.parametrize(("method", "path"), PROBES)
def test_hostile_paths_and_parameters_get_a_documented_4xx(
    hostile: TestClient, method: str, path: str
) -> None:
    assert_documented(hostile, method, path, headers=AUTH)


def test_a_chat_model_on_the_vector_search_is_a_bad_request(make_client: ClientFactory) -> None:
    client = make_client()  # embeddings from the model server, which serves "extractive" too
    response = client.get("/search/vector", params={"queryrag": "lamp", "model": "extractive"})
    assert response.status_code == 400, response.text
    assert "cannot embed" in response.json()["content"]["reason"]


def test_an_unexpected_error_is_a_500_with_its_request_id(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()

    async def boom() -> None:
        raise RuntimeError("a bug")

    client.app.add_api_route("/ai/boom", boom)  # type: ignore[attr-defined]
    with caplog.at_level(logging.ERROR):
        response = client.get("/ai/boom", headers={"X-Request-Id": "trace-500"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "trace-500"
    assert response.json()["content"]["label"] == "ragTechnicalError"
    assert "trace-500" in response.json()["content"]["reason"]
    logged = [r for r in caplog.records if r.getMessage().startswith("unexpected error")]
    assert logged and "trace-500" in logged[0].getMessage()
    assert "a bug" not in response.text  # the traceback stays in the log


def test_paths_cannot_forge_log_lines(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="service.access"):
        client.get("/ai/x%0AINFO forged line%00%E2%80%A8")
    lines = [r.getMessage() for r in caplog.records if r.name == "service.access"]
    assert lines
    assert all("\n" not in line and "\x00" not in line and "\u2028" not in line for line in lines)
    assert any("\\x0aINFO forged line\\x00" in line for line in lines)


def test_datafari_7_s_search_action_sends_solr_no_syntax(client: TestClient) -> None:
    """19,000 "(" made Solr's query parser overflow its stack (a 500 naming Solr's error):
    the search action's query is Solr's as every route's is."""
    for query in ("(" * 19_000, '"a ' * 3_000, "lighthouse)) AND {!join from=x to=y}*:*"):
        response = client.post("/ai", json={"query": query, "action": "search"})
        assert response.status_code == 200, response.text[:300]
        assert response.json()["status"] == "OK", response.text[:300]


def test_the_slash_redirect_names_no_host_a_request_gives(client: TestClient) -> None:
    for host in ("evil.example", "evil.example:8443", "127.0.0.1:8000"):
        response = client.post(
            "/ai/rag/?x=1", json={}, headers={"Host": host}, follow_redirects=False
        )
        assert response.status_code == 307
        assert response.headers["location"] == "/ai/rag?x=1"
    # under Datafari's prefix, it stays there (a proxy may forward only /Datafari/*)
    datafari = client.post("/Datafari/rest/v2.0/ai/rag/", json={}, follow_redirects=False)
    assert datafari.headers["location"] == "/Datafari/rest/v2.0/ai/rag"
    # a path that would read as a host ("//evil.example", "/\\evil.example") is folded
    assert relative("http://h//evil.example/x?q") == "/evil.example/x?q"
    assert relative("/\\evil.example") == "/evil.example"


# -- what anonymous callers are told ----------------------------------------------------------


def test_anonymous_readiness_holds_no_address_or_path(
    client: TestClient, solr_url: str, llm_base_url: str
) -> None:
    anonymous = client.get("/health/ready")
    assert anonymous.status_code == 200
    for secret in (solr_url, llm_base_url, "127.0.0.1", ".properties"):
        assert secret not in anonymous.text
    admin = client.get("/health/ready", headers=AUTH).json()["checks"]
    assert admin["config"]["path"].endswith(".properties")
    assert admin["llm"]["at"].startswith(llm_base_url)
    assert admin["llm"]["circuit"] == "closed"
    assert admin["llm"]["tokenizer"] == "chars"  # test-model: no known encoding
    assert "tokenizer" not in anonymous.json()["checks"]["llm"]


def test_error_reasons_name_the_upstream_without_its_address(
    make_client: ClientFactory,
) -> None:
    client = make_client({"ai.api.endpoint": "http://127.0.0.1:9/v1/", "llm.retries": 0})
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 503
    reason = response.json()["content"]["reason"]
    assert "the LLM" in reason
    assert "127.0.0.1" not in reason


# -- a client that leaves ----------------------------------------------------------------------


def test_a_client_leaving_an_ai_rag_stream_stops_the_llm_stream(
    tmp_path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> None:
    llm.then(Step(content=SAID + "word " * 50, pause_after_first_chunk=5, pause_after_words=7))
    path = write_properties(tmp_path / "rag.properties", base_properties)
    with serve_in_thread(create_app(path)) as base:
        body = {"query": "lighthouse", "stream": True}
        with httpx.stream("POST", f"{base}/ai/rag", json=body, timeout=10) as response:
            for line in response.iter_lines():
                if line.startswith("event: token"):
                    break
        assert llm.requests[0].wait_until_abandoned()
    assert not llm.requests[0].stream_completed


def test_a_client_leaving_a_fast_stream_leaves_no_burst_of_send_errors(
    tmp_path, base_properties: dict[str, object], corpus: object, llm: LLMScript,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    llm.answer = lambda request: SAID + "word " * 3000
    path = write_properties(tmp_path / "rag.properties", base_properties)
    with caplog.at_level(logging.WARNING), serve_in_thread(create_app(path)) as base:
        for _ in range(3):
            body = {"query": "lighthouse", "stream": True}
            with httpx.stream("POST", f"{base}/ai/rag", json=body, timeout=10) as response:
                for line in response.iter_lines():
                    if line.startswith("event: token"):
                        break
        time.sleep(1)
    port = base.rsplit(":", 1)[1]
    sends = [r for r in caplog.records if "socket.send() raised exception" in r.getMessage()]
    # the service's own server thread (the recording LLM writes to a closed socket too)
    assert [r for r in sends if r.threadName == f"test-server-{port}"] == []
