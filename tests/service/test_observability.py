"""/metrics in Prometheus format, request ids carried upstream, structured logs."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.observability import JsonFormatter, RequestIdFilter
from testing.llm_server import LLMScript, Step
from testing.servers import free_port, serve_in_thread
from testing.service import ClientFactory
from testing.solr_proxy import ProxyLog, create_solr_proxy


def sample(client: TestClient, name: str, **labels: str) -> float:
    """The value of one sample of /metrics (0 when it is not there yet)."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    for family in text_string_to_metric_families(response.text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return found.value
    return 0.0


def test_an_answer_is_counted_by_endpoint_stage_llm_call_and_tokens(
    client: TestClient, llm: LLMScript
) -> None:
    requests = ("solr_rag_requests_total", {"endpoint": "/ai/rag", "status": "200"})
    before = {
        "requests": sample(client, requests[0], **requests[1]),
        "calls": sample(client, "solr_rag_llm_calls_total"),
        "prompt": sample(client, "solr_rag_llm_tokens_total", kind="prompt"),
        "completion": sample(client, "solr_rag_llm_tokens_total", kind="completion"),
        "retrieve": sample(client, "solr_rag_stage_seconds_count", stage="retrieve"),
        "llm": sample(client, "solr_rag_stage_seconds_count", stage="llm"),
        "answers": sample(client, "solr_rag_answer_documents_count"),
        "call": sample(client, "solr_rag_llm_call_seconds_count", upstream="llm"),
    }
    assert client.post("/ai/rag", json={"query": "lighthouse"}).status_code == 200
    assert sample(client, requests[0], **requests[1]) == before["requests"] + 1
    assert sample(client, "solr_rag_llm_calls_total") == before["calls"] + 1
    assert sample(client, "solr_rag_llm_tokens_total", kind="prompt") == before["prompt"] + 11
    assert (
        sample(client, "solr_rag_llm_tokens_total", kind="completion") == before["completion"] + 7
    )
    assert (
        sample(client, "solr_rag_stage_seconds_count", stage="retrieve") == before["retrieve"] + 1
    )
    assert sample(client, "solr_rag_stage_seconds_count", stage="llm") == before["llm"] + 1
    assert sample(client, "solr_rag_answer_documents_count") == before["answers"] + 1
    assert sample(client, "solr_rag_llm_call_seconds_count", upstream="llm") == before["call"] + 1


def test_routes_are_labelled_by_template_not_by_path(
    make_client: ClientFactory,
) -> None:
    client = make_client()
    labels = {"endpoint": "/documents/{document_id:path}", "method": "DELETE"}
    before = sample(client, "solr_rag_requests_total", **labels, status="401")
    client.delete("/documents/some-id-1")
    client.delete("/documents/some-id-2")
    assert sample(client, "solr_rag_requests_total", **labels, status="401") == before + 2


def test_llm_and_solr_errors_are_counted(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client()
    llm_errors = {"upstream": "llm", "kind": "bad_response"}
    before = sample(client, "solr_rag_upstream_errors_total", **llm_errors)
    llm.then(Step(content="boom", status=500))
    assert client.post("/ai/rag", json={"query": "lighthouse"}).status_code == 502
    assert sample(client, "solr_rag_upstream_errors_total", **llm_errors) == before + 1

    dead = make_client(
        {"solr.url": f"http://127.0.0.1:{free_port()}/solr", "solr.startup.check": False}
    )
    solr_errors = {"upstream": "solr", "kind": "unavailable"}
    before = sample(dead, "solr_rag_upstream_errors_total", **solr_errors)
    assert dead.post("/ai/rag", json={"query": "lighthouse"}).status_code == 503
    assert sample(dead, "solr_rag_upstream_errors_total", **solr_errors) == before + 1


def test_the_request_id_reaches_the_llm_and_comes_back(
    client: TestClient, llm: LLMScript, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="service.access"):
        response = client.post(
            "/ai/rag", json={"query": "lighthouse"}, headers={"X-Request-Id": "trace-42"}
        )
    assert response.headers["x-request-id"] == "trace-42"
    assert llm.requests[0].headers["x-request-id"] == "trace-42"
    access = [r for r in caplog.records if r.name == "service.access"]
    assert access[-1].request_id == "trace-42"
    assert access[-1].status == 200


def test_a_hostile_request_id_is_replaced(client: TestClient, llm: LLMScript) -> None:
    response = client.post(
        "/ai/rag", json={"query": "lighthouse"}, headers={"X-Request-Id": "bad id\r\nX: y"}
    )
    generated = response.headers["x-request-id"]
    assert generated != "bad id\r\nX: y" and len(generated) == 32
    assert llm.requests[0].headers["x-request-id"] == generated


def test_json_logs_are_one_object_a_line_with_the_request_id() -> None:
    record = logging.makeLogRecord(
        {"name": "service.access", "levelname": "INFO", "msg": "POST %s", "args": ("/ai/rag",)}
    )
    record.status = 200
    RequestIdFilter().filter(record)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "POST /ai/rag"
    assert entry["request_id"] == "-"
    assert entry["status"] == 200
    assert entry["level"] == "INFO"


def test_the_request_id_reaches_solr(
    make_client: ClientFactory, llm: LLMScript, solr_url: str
) -> None:
    log = ProxyLog()
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        client = make_client({"solr.url": f"{base}/solr"})
        client.post("/ai/rag", json={"query": "lighthouse"}, headers={"X-Request-Id": "trace-7"})
    search = log.searches[-1]
    assert (search.request_id_header, search.request_id_param) == ("trace-7", "trace-7")
