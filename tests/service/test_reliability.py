"""Faults and limits: every failure of Solr or the LLM ends in the documented error within its
deadline, the service serves normally once the fault clears, and a dead LLM is not hammered."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.errors import SolrLayoutError
from service.llm.breaker import CircuitBreaker
from service.retrieval import SolrClient
from testing.llm_server import LLMScript, Step, create_llm_app
from testing.servers import free_port, serve_in_thread
from testing.service import ADMIN_TOKEN, ROOT, ClientFactory, write_properties
from testing.solr import LocalSolr, local_solr
from testing.solr_proxy import ProxyLog, create_solr_proxy
from tests.service.test_observability import sample
from tests.service.test_rag_errors import error_of


def ask(client: TestClient) -> httpx.Response:
    return client.post("/ai/rag", json={"query": "lighthouse"})


# -- LLM faults: the documented error in time, then normal service ------------------------

LLM_FAULTS = {
    "hangs past the read timeout": (Step(content="late", delay=60), 504),
    "answers 500": (Step(content="internal error", status=500), 502),
    "answers malformed JSON": (
        Step(body='{"choices": [', headers={"Content-Type": "application/json"}),
        502,
    ),
    "answers 429 to every retry": (Step(content="rate limited", status=429), 502),
}


@pytest.mark.parametrize("fault", LLM_FAULTS, ids=list(LLM_FAULTS))
def test_an_llm_fault_gives_its_error_in_time_then_service_resumes(
    make_client: ClientFactory, llm: LLMScript, fault: str
) -> None:
    step, status = LLM_FAULTS[fault]
    client = make_client({"llm.timeout.read": 1, "llm.retries": 0})
    llm.then(step)
    started = time.monotonic()
    error_of(ask(client), status, "ragTechnicalError")
    assert time.monotonic() - started < 30  # the hang is 60 s: not waited out
    assert ask(client).status_code == 200


def test_an_llm_refusing_connections_then_coming_up(
    make_client: ClientFactory, llm_script: LLMScript
) -> None:
    port = free_port()
    client = make_client({"ai.api.endpoint": f"http://127.0.0.1:{port}/v1/"})
    started = time.monotonic()
    content = error_of(ask(client), 503, "ragTechnicalError")
    assert time.monotonic() - started < 30  # not retried for long (a bound no busy box breaks)
    assert "unreachable" in content["reason"]
    with serve_in_thread(create_llm_app(llm_script), port=port):
        assert ask(client).status_code == 200


def test_429_then_200_waits_for_retry_after_and_answers(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"llm.retries": 2})
    llm.then(Step(content="slow down", status=429, headers={"Retry-After": "1"}))
    started = time.monotonic()
    response = ask(client)
    assert response.status_code == 200, response.text
    assert time.monotonic() - started >= 1.0
    assert len(llm.requests) == 2


# -- the circuit breaker -----------------------------------------------------------------


def test_a_failing_llm_opens_the_breaker_and_a_trial_closes_it(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"llm.circuit.failures": 2, "llm.circuit.cooldown": 1})
    llm.then(Step(content="down", status=503), Step(content="down", status=503))
    error_of(ask(client), 502, "ragTechnicalError")
    error_of(ask(client), 502, "ragTechnicalError")
    content = error_of(ask(client), 503, "ragTechnicalError")
    assert "circuit breaker" in content["reason"]
    assert len(llm.requests) == 2  # the open breaker did not call the LLM, nor wait for it
    # readiness asks the LLM itself (which lists its models): a breaker that requests opened
    # is shown to the admin, never taken for the service being down
    ready = client.get("/health/ready", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert ready.status_code == 200
    assert ready.json()["checks"]["llm"]["circuit"] == "open"
    time.sleep(1.1)
    assert ask(client).status_code == 200  # the trial call succeeds: closed again
    assert ask(client).status_code == 200
    assert len(llm.requests) == 4


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_half_open_breaker_lets_one_trial_through_and_reopens_on_its_failure() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(3, 10.0, clock=clock)
    for _ in range(3):
        breaker.before_call("the LLM")
        breaker.record_failure()
    assert breaker.state == "open"
    with pytest.raises(Exception, match="paused"):
        breaker.before_call("the LLM")
    clock.now += 10
    assert breaker.state == "half-open"
    breaker.before_call("the LLM")  # the trial
    with pytest.raises(Exception, match="paused"):
        breaker.before_call("the LLM")  # only one trial at a time
    breaker.record_failure()
    assert breaker.state == "open"
    clock.now += 10
    breaker.before_call("the LLM")
    breaker.record_success()
    assert breaker.state == "closed"
    breaker.before_call("the LLM")


def test_breaker_off_never_opens() -> None:
    breaker = CircuitBreaker.off()
    for _ in range(50):
        breaker.record_failure()
    assert breaker.state == "closed"
    breaker.before_call("the LLM")


# -- the overall request deadline -------------------------------------------------------


def test_request_timeout_bounds_the_whole_chain(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client(
        {
            "request.timeout": 1,
            "llm.timeout.read": 10,
            "chat.query.rewriting.enabled": True,
        }
    )
    llm.delay = 0.6  # the rewrite and the answer each take less than the deadline; not both
    content = error_of(ask(client), 504, "ragTechnicalError")  # not a 200 after 1.2 s
    assert "request.timeout" in content["reason"]
    assert len(llm.requests) >= 2


def test_request_timeout_ends_a_stream_that_stalls(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"request.timeout": 1, "llm.timeout.read": 10})
    llm.then(Step(content="one two three", pause_after_first_chunk=60))
    started = time.monotonic()
    with client.stream("POST", "/ai/rag", json={"query": "lighthouse", "stream": True}) as r:
        text = "".join(r.iter_text())
    assert time.monotonic() - started < 30  # the stall is 60 s: not waited out
    assert "event: error" in text
    assert "request.timeout" in text


# -- input limits -------------------------------------------------------------------------


def test_a_body_over_the_size_limit_gets_413(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"request.max.bytes": 2048})
    response = client.post("/ai/rag", json={"query": "lighthouse " * 300})
    content = error_of(response, 413, "ragPayloadTooLarge")  # labels by kind (issue 49)
    assert "request.max.bytes" in content["reason"]
    assert llm.requests == []


def test_a_chunked_body_is_counted_as_it_arrives(make_client: ClientFactory) -> None:
    client = make_client({"request.max.bytes": 2048})

    def body() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(100):
            yield b"lighthouse " * 10
        yield b'"}'

    response = client.post("/ai/rag", content=body(), headers={"Content-Type": "application/json"})
    error_of(response, 413, "ragPayloadTooLarge")  # labels by kind (issue 49)


# -- Solr stopped mid-run -------------------------------------------------------------------


@pytest.fixture
def own_solr(tmp_path: Path) -> Iterator[LocalSolr]:
    """A Solr of this test's own, which it may stop and start again."""
    with local_solr(tmp_path / "solr") as solr:
        yield solr


def test_solr_stopped_mid_run_then_restarted(
    own_solr: LocalSolr, make_client: ClientFactory, llm: LLMScript
) -> None:
    solr_url = own_solr.url

    async def index() -> None:
        async with httpx.AsyncClient() as http:
            document = {
                "id": "keeper",
                "title": "Lighthouse keeper",
                "content": "The lighthouse keeper lit the lamp at dusk.",
            }
            await SolrClient(http, solr_url).add("FileShare", [document], commit=True)

    asyncio.run(index())
    client = make_client({"solr.url": solr_url, "solr.timeout.read": 5})
    assert ask(client).json()["content"]["documents"][0]["id"] == "keeper"

    own_solr.stop()
    started = time.monotonic()
    content = error_of(ask(client), 503, "ragTechnicalError")
    assert time.monotonic() - started < 30  # refused at once: not retried for long
    assert "Solr" in content["reason"]
    assert client.get("/health/ready").status_code == 503
    assert client.get("/health/live").status_code == 200

    own_solr.start()
    response = ask(client)
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "keeper"


def test_a_dead_node_in_solr_url_costs_no_request(
    solr_url: str, make_client: ClientFactory, llm: LLMScript
) -> None:
    """Two nodes listed, one never up: every request is answered (the dead node is tried at
    most once per rest period, then passed over), and health names it, readiness staying up."""
    dead = f"http://127.0.0.1:{free_port()}/solr"
    client = make_client({"solr.url": f"{dead},{solr_url}", "solr.startup.check": False})
    before = sample(client, "solr_rag_solr_failovers_total")
    for _ in range(6):
        assert ask(client).status_code == 200
    assert 1 <= sample(client, "solr_rag_solr_failovers_total") - before <= 2

    ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"]["solr:nodes"] == {"status": "up", "up": 1, "known": 2}
    assert dead not in ready.text  # addresses are for the admin
    nodes = client.get("/health", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    states = {node["at"]: node for node in nodes["checks"]["solr:nodes"]["nodes"]}
    assert states[dead]["status"] == "down" and "unreachable" in states[dead]["reason"]
    assert states[solr_url]["status"] == "up"
    assert sample(client, "solr_rag_solr_nodes", state="down") == 1


@pytest.mark.parametrize(("status", "node_down"), [(500, False), (503, True)])
def test_a_node_answering_errors_is_passed_over(
    solr_url: str, make_client: ClientFactory, llm: LLMScript, status: int, node_down: bool
) -> None:
    """A node answering 5xx: the search is asked of the other node. A 503 (unavailable) marks
    the node down; a 500 may be the request's own doing, so it leaves the node up: a client
    cannot make the service think Solr is down."""
    log = ProxyLog(fail_with=status)
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        troubled = f"{base}/solr"
        client = make_client({"solr.url": f"{troubled},{solr_url}", "solr.startup.check": False})
        for _ in range(4):
            assert ask(client).status_code == 200
        assert log.searches  # the troubled node was asked
        nodes = client.get("/health", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    states = {node["at"]: node["status"] for node in nodes["checks"]["solr:nodes"]["nodes"]}
    assert states[troubled] == ("down" if node_down else "up")
    assert nodes["status"] == "up"


# -- startup: fail fast on a Solr the service cannot use ------------------------------------


def _start(tmp_path: Path, base: dict[str, object], **overrides: object) -> None:
    path = write_properties(tmp_path / "startup.properties", {**base, **overrides})
    with TestClient(create_app(path)):
        pass


def test_startup_names_a_missing_collection(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    with pytest.raises(SolrLayoutError, match="no usable collection 'Nowhere'"):
        _start(tmp_path, base_properties, **{"solr.collection.documents": "Nowhere"})


def test_startup_names_a_missing_field(tmp_path: Path, base_properties: dict[str, object]) -> None:
    with pytest.raises(SolrLayoutError, match=r"lacks the field.* vector_999"):
        _start(tmp_path, base_properties, **{"solr.vector.field": "vector_999"})


@pytest.mark.usefixtures("corpus")
def test_startup_refuses_vectors_of_another_model(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    """bge-small-en-v1.5 has the dimension of all-MiniLM-L6-v2, whose vectors the corpus
    holds: only the model name stored with the passages tells them apart."""
    with pytest.raises(SolrLayoutError, match=r"vector_384 holds vectors of 'all-MiniLM-L6-v2'"):
        _start(tmp_path, base_properties, **{"ai.embeddings.model": "bge-small-en-v1.5"})


def test_startup_gives_up_on_an_unreachable_solr_after_its_wait(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/solr"
    started = time.monotonic()
    with pytest.raises(SolrLayoutError, match=r"unreachable.*solr.startup.wait"):
        _start(tmp_path, base_properties, **{"solr.url": dead, "solr.startup.wait": 1})
    assert time.monotonic() - started < 20  # its 1 s, not the 30 s default


def test_the_cli_refuses_to_serve_with_one_clear_line(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    path = write_properties(
        tmp_path / "cli.properties", {**base_properties, "solr.collection.passages": "Gone"}
    )
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve", "--config", str(path), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "no usable collection 'Gone'" in done.stderr
    assert "Traceback" not in done.stderr


# -- lifecycle -------------------------------------------------------------------------------


def test_sigterm_lets_the_request_in_flight_finish(
    tmp_path: Path, base_properties: dict[str, object], llm: LLMScript
) -> None:
    port = free_port()
    path = write_properties(tmp_path / "serve.properties", base_properties)
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--config", str(path), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_live(base, process)
        llm.then(Step(content="Answered after the signal: the keeper lit the lamp [1]", delay=2))
        result: dict[str, httpx.Response] = {}
        asking = threading.Thread(
            target=lambda: result.update(
                r=httpx.post(f"{base}/ai/rag", json={"query": "lighthouse"}, timeout=30)
            )
        )
        asking.start()
        _wait_for(lambda: bool(llm.requests), "the request to reach the LLM")
        process.send_signal(signal.SIGTERM)
        asking.join(timeout=30)
        assert result["r"].status_code == 200
        assert result["r"].json()["content"]["message"].startswith("Answered after the signal")
        # it exits on its own once the request is done (uvicorn re-raises the signal then)
        assert process.wait(timeout=15) in (0, -signal.SIGTERM)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{base}/health/live", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _wait_until_live(base: str, process: subprocess.Popen[bytes]) -> None:
    def live() -> bool:
        if process.poll() is not None:
            raise AssertionError(process.stderr.read().decode() if process.stderr else "exited")
        try:
            return httpx.get(f"{base}/health/live", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    _wait_for(live, "the service to start")


def _wait_for(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
