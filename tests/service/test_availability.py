"""One client must not stall everyone (issue 39): what an anonymous or a single caller sends
costs bounded work, on the service's real HTTP stack with the real Solr and LLM servers."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service.api.app import create_app
from service.api.connections import HEADER_SECONDS
from service.api.documents import MAX_UPLOAD_CHARS
from service.api.llm_work import LlmPace
from service.api.payload import MAX_DEPTH, QUESTION_BYTES
from service.errors import Overloaded
from service.grounding.check import MAX_BY_MEANING, MAX_CLAUSES, GroundingCheck
from service.ingest.extract import MAX_DOCUMENT_CHARS
from service.llm.breaker import CircuitBreaker
from service.llm.client import ChatClient, LLMOptions
from service.llm.embeddings import EmbeddingsClient
from service.llm.types import ChatMessage
from service.processes import start_server, stop_group
from service.text.claims import MAX_SENTENCES
from service.upstream import POOL_WAIT_SECONDS
from testing.hostile_schemas import HOSTILE_SCHEMAS
from testing.llm_server import LLMScript, Step
from testing.servers import free_port, serve_in_thread
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory, write_properties
from tests.service.test_lifecycle import wait_until

DEEP = b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5)
# a body the service must refuse if it parsed it (too deep): who answers first shows the order
ANONYMOUS = {"Content-Type": "application/json"}


# -- item 1: JSON bodies are read after routing and authentication, within the route's limit --


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_path_no_route_serves_never_parses_the_body(
    make_client: ClientFactory, content_type: str
) -> None:
    client = make_client()
    response = client.post("/no/such/route", content=DEEP, headers={"Content-Type": content_type})
    assert response.status_code == 404, response.text


@pytest.mark.parametrize(
    "path", ["/ai/rag", "/ai/summarize", "/v1/chat/completions", "/ai", "/ai/stream"]
)
def test_a_caller_without_the_api_key_is_refused_before_its_body_is_read(
    make_client: ClientFactory, path: str
) -> None:
    client = make_client({"api.keys": "the-key"})
    response = client.post(path, content=DEEP, headers=ANONYMOUS)
    assert response.status_code == 401, response.text
    # with the key, the same body is read and refused for what it is
    keyed = {**ANONYMOUS, "X-API-Key": "the-key"}
    response = client.post(path, content=DEEP, headers=keyed)
    # Datafari 7's stream says it in a 200 stream (stream.started, error, stream.completed)
    assert response.status_code == (200 if path == "/ai/stream" else 400), response.text
    assert "nested too deep" in response.text


@pytest.mark.parametrize("path", ["/admin/config", "/documents"])
def test_admin_bodies_are_read_only_with_the_admin_token(
    make_client: ClientFactory, path: str
) -> None:
    client = make_client()
    method = client.patch if path == "/admin/config" else client.post
    assert method(path, content=DEEP, headers=ANONYMOUS).status_code == 401
    admin = {**ANONYMOUS, "Authorization": f"Bearer {ADMIN_TOKEN}"}
    response = method(path, content=DEEP, headers=admin)
    assert response.status_code == 400, response.text
    assert "nested too deep" in response.text


def test_a_question_body_is_bounded_by_its_route_not_by_the_upload_limit(
    make_client: ClientFactory,
) -> None:
    client = make_client({"request.max.bytes": 8 * QUESTION_BYTES})
    padding = "x" * QUESTION_BYTES
    body = json.dumps({"query": "lamp", "history": [{"role": "user", "content": padding}]})
    response = client.post("/ai/rag", content=body, headers=ANONYMOUS)
    assert response.status_code == 413, response.text
    assert str(QUESTION_BYTES) in response.json()["content"]["reason"]
    # a chunked body (no Content-Length) is counted as it arrives
    response = client.post(
        "/ai/rag", content=iter([body[:1000].encode(), body[1000:].encode()]), headers=ANONYMOUS
    )
    assert response.status_code == 413, response.text


def test_a_large_valid_body_is_parsed_off_the_loop_and_served(make_client: ClientFactory) -> None:
    client = make_client()
    history = [{"role": "user", "content": "lamp " * 160}] * 90
    body = json.dumps({"query": "lamp", "history": history})
    assert len(body) > 64 * 1024
    response = client.post("/ai/rag", content=body, headers=ANONYMOUS)
    assert response.status_code in (200, 428), response.text
    assert response.json()["status"] in ("OK", "ERROR")


# -- item 2: one client cannot starve the LLM pool, open the breaker, or run on after leaving --


def _ask(base: str, key: str, timeout: float = 30) -> httpx.Response:
    return httpx.post(
        f"{base}/ai/rag", json={"query": "lamp"}, headers={"X-API-Key": key}, timeout=timeout
    )


def test_one_caller_over_its_cap_gets_a_429_while_another_is_served(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"api.keys": "key-a,key-b", "llm.max.concurrent.per.caller": 2})
    llm.then(Step(content="slow [1]", delay=10), Step(content="slow [1]", delay=10))
    with ThreadPoolExecutor(2) as pool:
        slow = [pool.submit(_ask, base, "key-a") for _ in range(2)]
        assert wait_until(lambda: len(llm.requests) == 2, seconds=10)
        refused = _ask(base, "key-a")
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"] == "2"
        assert refused.json()["content"]["label"] == "ragTooManyRequests"
        assert "llm.max.concurrent.per.caller" in refused.json()["content"]["reason"]
        other = _ask(base, "key-b")  # another caller is answered meanwhile
        assert other.status_code == 200, other.text
        assert not any(future.done() for future in slow)  # neither waited for key-a's answers
        assert [future.result().status_code for future in slow] == [200, 200]
    assert _ask(base, "key-a").status_code == 200  # its answers done, key-a is served again


def test_a_made_up_token_does_not_make_a_new_caller(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"llm.max.concurrent.per.caller": 1})  # no keys: callers by address
    llm.then(Step(content="slow [1]", delay=4))
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_ask, base, "invented-1")
        assert wait_until(lambda: len(llm.requests) == 1, seconds=10)
        assert _ask(base, "invented-2").status_code == 429
        assert slow.result().status_code == 200


async def test_a_full_connection_pool_is_busy_not_an_llm_failure(
    llm: LLMScript, llm_base_url: str
) -> None:
    llm.then(Step(content="slow", delay=POOL_WAIT_SECONDS + 5))
    breaker = CircuitBreaker(1, 60)  # one failure would open it
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1)) as http:
        client = ChatClient(http, LLMOptions(endpoint=f"{llm_base_url}/v1/", retries=0), breaker)
        question = [ChatMessage("user", "lamp?")]
        first = asyncio.create_task(client.complete(question))
        await asyncio.sleep(0.5)
        with pytest.raises(Overloaded) as busy:
            await client.complete(question)  # waits POOL_WAIT_SECONDS for the one connection
        assert busy.value.status == 503 and busy.value.retry_after
        assert (await first).text == "slow"
    assert breaker.state == "closed"


def test_a_client_that_leaves_cancels_its_request(
    service: ServiceFactory, llm: LLMScript, caplog: pytest.LogCaptureFixture
) -> None:
    base = service()
    llm.then(Step(content="too late [1]", delay=20))
    with caplog.at_level(logging.INFO, logger="service.access"):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{base}/ai/rag", json={"query": "lamp"}, timeout=1)
        # the LLM call is abandoned within seconds, not after its 20 s
        assert wait_until(lambda: llm.requests and llm.requests[0].left_while_waiting, seconds=5)
        assert wait_until(lambda: any(" 499 " in r.getMessage() for r in caplog.records), seconds=5)
    assert not any(" 500 " in r.getMessage() for r in caplog.records)


# -- item 3: a caller's JSON schema costs bounded work ----------------------------------------


def _ask_for_json(base: str, name: str, schema: dict) -> httpx.Response:
    form = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    question = [{"role": "user", "content": "lighthouse"}]
    return httpx.post(
        f"{base}/v1/chat/completions",
        json={"model": "rag", "messages": question, "response_format": form},
        timeout=30,
    )


@pytest.mark.parametrize("name", HOSTILE_SCHEMAS)
def test_a_schema_that_could_cost_unbounded_work_is_a_400_before_any_llm_call(
    service: ServiceFactory, llm: LLMScript, name: str
) -> None:
    schema, named = HOSTILE_SCHEMAS[name]
    started = time.monotonic()
    response = _ask_for_json(service(), "x", schema)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("response_format") and named in message, message
    assert llm.requests == []
    assert time.monotonic() - started < 30  # bounded work, however busy the machine


def test_a_schema_with_shared_definitions_and_a_pattern_is_served(
    service: ServiceFactory, llm: LLMScript
) -> None:
    schema = {
        "type": "object",
        "properties": {"year": {"$ref": "#/$defs/year"}, "when": {"$ref": "#/$defs/year"},
                       "code": {"type": "string", "pattern": "^(a+)+$"}},
        "$defs": {"year": {"type": "integer", "minimum": 0}},
        "required": ["year"],
    }  # fmt: skip
    llm.then(Step(content='{"year": 1952, "when": 1953, "code": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}'))
    response = _ask_for_json(service(), "y", schema)
    assert response.status_code == 200, response.text
    assert json.loads(response.json()["choices"][0]["message"]["content"])["year"] == 1952


# -- item 7: smaller holes ----------------------------------------------------------------------

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def test_an_empty_file_is_skipped_not_ingested(make_client: ClientFactory) -> None:
    client = make_client()
    files = [("files", ("empty.txt", b"", "text/plain")), ("files", ("blank.md", b" \n\n", "x"))]
    response = client.post("/documents/files", files=files, headers=ADMIN)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert content["documents"] == 0
    assert {s["file"] for s in content["skipped"]} == {"empty.txt", "blank.md"}
    assert all("no text" in s["reason"] for s in content["skipped"])


def test_a_file_part_without_a_filename_is_a_plain_400(make_client: ClientFactory) -> None:
    client = make_client()
    nameless = {"files": ("", b"hi", "text/plain")}
    response = client.post("/documents/files", files=nameless, headers=ADMIN)
    assert response.status_code == 400, response.text
    reason = response.json()["content"]["reason"]
    assert "expected a file" in reason and "class" not in reason, reason


def test_kaito_ids_are_reserved_to_the_kaito_api(make_client: ClientFactory) -> None:
    client = make_client()
    document = {"id": "kaito/docs/1", "title": "t", "content": "text"}
    response = client.post("/documents", json={"documents": [document]}, headers=ADMIN)
    assert response.status_code == 400, response.text
    assert "POST /index" in response.json()["content"]["reason"]


@pytest.mark.parametrize("name", ["docs\n", "rag", "FileShare", "bm25", "Hybrid"])
def test_a_kaito_index_name_v1_could_not_reach_is_refused(
    make_client: ClientFactory, name: str
) -> None:
    client = make_client()
    body = {"index_name": name, "documents": [{"text": "the lamp is lit at dusk"}]}
    response = client.post("/index", json=body, headers=ADMIN)
    assert response.status_code == 400, response.text


@pytest.mark.parametrize("index_name", [5, True, ["rag"]])
def test_an_index_name_that_is_not_a_string_is_refused(
    make_client: ClientFactory, llm: LLMScript, index_name: object
) -> None:
    client = make_client()
    body = {"model": "rag", "messages": [{"role": "user", "content": "lamp"}]}
    response = client.post("/v1/chat/completions", json={**body, "index_name": index_name})
    assert response.status_code == 400, response.text
    assert "index_name must be a string" in response.json()["error"]["message"]
    assert llm.requests == []


@pytest.mark.parametrize("path", ["/no/such/page", "/robots.txt"])
def test_an_unknown_path_answers_the_documented_envelope(
    make_client: ClientFactory, path: str
) -> None:
    response = make_client().get(path)
    assert response.status_code == 404
    body = response.json()
    assert body["status"] == "ERROR" and body["content"]["code"] == "404", body


def test_a_client_that_leaves_mid_body_is_a_499_not_a_500(
    service: ServiceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = service().removeprefix("http://").split(":")
    with caplog.at_level(logging.INFO, logger="service.access"):
        with socket.create_connection((host, int(port))) as connection:
            connection.sendall(
                b"POST /ai/rag HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n" + b'{"query": "la'
            )
            time.sleep(0.3)
        assert wait_until(lambda: any(" 499 " in r.getMessage() for r in caplog.records), seconds=5)
    assert not any(" 500 " in r.getMessage() for r in caplog.records)


# -- item 5: grounding costs bounded work whatever the answer's length ------------------------


async def test_a_thousand_clause_answer_costs_one_bounded_embeddings_request(
    llm: LLMScript, llm_base_url: str
) -> None:
    source = "The keeper lit the lamp every evening at dusk in the old stone tower."
    # 1,000 sentences that words leave open (a paraphrase shares few words), five texts
    variants = ["The warden ignited a beacon nightly", "A guardian kindled the light at night",
                "Each sunset the watchman started the flame", "The attendant fired the signal",
                "Every dusk a custodian lit the lantern"]  # fmt: skip
    sentence = "; ".join(variants) + "."  # five clauses a sentence, 1,000 in all
    answer = " ".join([sentence] * MAX_SENTENCES)
    async with httpx.AsyncClient() as http:
        embeddings = EmbeddingsClient(http, LLMOptions(endpoint=f"{llm_base_url}/v1/"))
        report = await GroundingCheck(embeddings).run(answer, [(1, source)])
    assert len(llm.embedded) == 1  # one request
    texts = llm.embedded[0]
    assert len(texts) == len(set(texts)) <= MAX_BY_MEANING * 4  # deduplicated, bounded
    assert report.total == MAX_SENTENCES
    # the sentences whose clauses are past MAX_CLAUSES are not checked, so not vouched for
    checked_sentences = MAX_CLAUSES // len(variants)
    assert not any(check.supported for check in report.sentences[checked_sentences:])


# -- item 6: extracted text is bounded per document and per upload ----------------------------


def test_a_file_whose_text_is_too_long_is_a_413_naming_it(make_client: ClientFactory) -> None:
    client = make_client()
    big = ("lamp " * (MAX_DOCUMENT_CHARS // 5 + 1)).encode()
    response = client.post(
        "/documents/files", files=[("files", ("big.txt", big, "text/plain"))], headers=ADMIN
    )
    assert response.status_code == 413, response.text
    reason = response.json()["content"]["reason"]
    assert "big.txt" in reason and f"{MAX_DOCUMENT_CHARS:,}" in reason, reason


def test_an_upload_whose_files_bring_too_much_text_is_a_413(make_client: ClientFactory) -> None:
    client = make_client({"request.max.bytes": 64 * 1024 * 1024})
    part = ("lamp " * (MAX_DOCUMENT_CHARS // 5 - 10)).encode()  # each within a document's cap
    count = MAX_UPLOAD_CHARS // len(part) + 1
    files = [("files", (f"part{i}.txt", part, "text/plain")) for i in range(count)]
    response = client.post("/documents/files", files=files, headers=ADMIN)
    assert response.status_code == 413, response.text
    assert "one upload may bring" in response.json()["content"]["reason"]
    listed = client.get("/documents", headers=ADMIN).json()["content"]["documents"]
    assert not any(d["id"].startswith("part") for d in listed)  # nothing was indexed


# -- item 7: OpenAI options are honoured or refused, never ignored ------------------------------

ASK = {"model": "rag", "messages": [{"role": "user", "content": "Who lit the lighthouse lamp?"}]}


@pytest.mark.parametrize(
    "option",
    [
        {"max_tokens": 0}, {"max_tokens": -1}, {"max_tokens": "100"}, {"max_tokens": 1.5},
        {"max_completion_tokens": True}, {"top_p": 2}, {"frequency_penalty": 3},
        {"presence_penalty": "high"}, {"seed": "x"}, {"seed": 2**64}, {"logit_bias": {"abc": 1}},
        {"logit_bias": {"50256": 500}}, {"user": 5}, {"tool_choice": "required"},
    ],
)  # fmt: skip
def test_an_openai_option_out_of_range_is_a_400_before_any_llm_call(
    make_client: ClientFactory, llm: LLMScript, option: dict
) -> None:
    response = make_client().post("/v1/chat/completions", json={**ASK, **option})
    assert response.status_code == 400, response.text
    assert next(iter(option)) in response.json()["error"]["message"]
    assert llm.requests == []


def test_sampling_options_reach_the_llm(make_client: ClientFactory, llm: LLMScript) -> None:
    options = {"top_p": 0.5, "frequency_penalty": 0.1, "presence_penalty": -0.2, "seed": 7,
               "logit_bias": {"50256": -100}, "user": "reader-1", "tool_choice": "none",
               "max_tokens": 42}  # fmt: skip
    response = make_client().post("/v1/chat/completions", json={**ASK, **options})
    assert response.status_code == 200, response.text
    sent = llm.requests[-1].body
    for name, value in options.items():
        if name != "tool_choice":  # none: no tool, nothing to send
            assert sent[name] == value, name


def test_a_body_that_stops_arriving_is_a_408_and_frees_the_connection(
    service: ServiceFactory,
) -> None:
    host, port = service({"request.body.timeout": 1}).removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        started = time.monotonic()
        connection.sendall(
            b"POST /ai/rag HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"query": "la'
        )
        answer = ""
        while "}}" not in answer:  # the whole error envelope, however it is cut in packets
            part = connection.recv(65536).decode(errors="replace")
            if not part:
                break
            answer += part
        assert answer.startswith("HTTP/1.1 408"), answer[:200]
        assert "request.body.timeout" in answer
        assert time.monotonic() - started < 30  # its 1 s, not the client's patience


def test_a_body_trickled_a_byte_at_a_time_ends_within_request_timeout(
    service: ServiceFactory,
) -> None:
    """A byte every second never pauses for request.body.timeout, but the whole body must
    arrive within request.timeout: a 408 then, naming it."""
    base = service({"request.body.timeout": 2, "request.timeout": 3, "request.max.bytes": 2048})
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(
            b"POST /ai/rag HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        connection.settimeout(1)
        answer = ""
        for _ in range(60):  # a byte a second, for up to a minute
            try:
                part = connection.recv(65536).decode(errors="replace")
            except TimeoutError:
                connection.sendall(b" ")
                continue
            if not part:
                break
            answer += part
            if "}}" in answer:
                break
        assert answer.startswith("HTTP/1.1 408"), answer[:200]
        assert "request.timeout" in answer, answer


def ai_rag_head(length: int) -> bytes:
    """The head of a raw `POST /ai/rag` whose JSON body is `length` bytes (the connection
    closed after its answer)."""
    return (
        b"POST /ai/rag HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()
    )


def read_to_end(connection: socket.socket) -> bytes:
    answer = b""
    while part := connection.recv(65536):
        answer += part
    return answer


def test_a_body_still_arriving_is_no_question_the_llm_is_answering(
    tmp_path: Path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> None:
    """The LLM's pace (llm.admission) counts a question once its body is whole: two clients
    trickling bodies cannot make it look busy and turn everyone else away with 503s."""
    app = create_app(write_properties(tmp_path / "rag.properties", base_properties))
    pace, callers = app.state.door.pace, app.state.door.callers
    with serve_in_thread(app) as base:
        host, port = base.removeprefix("http://").split(":")
        body = json.dumps({"query": "How was the lighthouse lamp lit?"}).encode()
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(ai_rag_head(len(body)) + body[:5])
            assert wait_until(lambda: sum(callers.values()) == 1)  # at the door, admitted
            assert pace.in_progress == 0
            connection.sendall(body[5:])
            answer = read_to_end(connection)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        # counted once its answer was sent (the door's count ends just after the last byte)
        assert wait_until(lambda: pace.completed == 1 and pace.in_progress == 0)


def test_a_question_whose_body_ends_when_the_llm_is_full_is_refused_then(
    tmp_path: Path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> None:
    """Admitted at its headers, a question is asked again once its body is whole: others
    admitted meanwhile (a burst, or a client that sends its body after an `Expect:
    100-continue`) made the LLM full: a 503 with Retry-After then, not a wait past the
    deadline."""
    settings = {**base_properties, "llm.admission": "on", "request.timeout": 30,
                "llm.timeout.read": 30}  # fmt: skip
    app = create_app(write_properties(tmp_path / "rag.properties", settings))
    app.state.door.pace = LlmPace(in_progress=1, completed=5, answered=1.0, busy=60.0)
    with serve_in_thread(app) as base:
        host, port = base.removeprefix("http://").split(":")
        body = json.dumps({"query": "How was the lighthouse lamp lit?"}).encode()
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(ai_rag_head(len(body)) + body[:5])
            callers = app.state.door.callers
            assert wait_until(lambda: sum(callers.values()) == 1)  # admitted: one in progress
            app.state.door.pace.in_progress = 2  # two more questions reached the LLM meanwhile
            connection.sendall(body[5:])
            answer = read_to_end(connection)
    assert answer.startswith(b"HTTP/1.1 503"), answer[:300]
    assert b"retry-after" in answer.lower() and b"the LLM is answering" in answer
    assert not llm.requests


@pytest.mark.usefixtures("corpus")
def test_connections_that_never_complete_their_headers_are_closed(
    tmp_path: Path, base_properties: dict[str, object], llm: LLMScript
) -> None:
    config = write_properties(tmp_path / "rag.properties", base_properties)
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config)]
    server = start_server(
        [*command, "--port", str(port)], f"http://127.0.0.1:{port}/health/live", what="service"
    )
    try:
        silent = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"POST /ai/rag HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:  # one kept-alive link
            assert http.get("/health/live").status_code == 200
            time.sleep(1)
            assert http.get("/health/live").status_code == 200  # the same connection again
        for connection in (silent, slow):
            connection.settimeout(HEADER_SECONDS + 60)
            started = time.monotonic()
            assert connection.recv(100) == b""  # closed by the service
            assert time.monotonic() - started < HEADER_SECONDS + 30  # not left open
            connection.close()
    finally:
        stop_group(server, timeout=30)
