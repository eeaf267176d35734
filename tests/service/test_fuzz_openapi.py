"""Schemathesis fuzzes the service from its own OpenAPI spec, on a real socket, with the real
Solr and the recording LLM: no request may get a 5xx or a response the spec does not allow.

It gets no admin token: the ingestion endpoints answer 401 (documented) instead of filling the
shared test collections with generated documents.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from service.api.app import create_app
from testing.llm_server import LLMScript
from testing.servers import serve_in_thread
from testing.service import ROOT, write_properties

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ]
)


@pytest.fixture
def service_url(
    tmp_path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> Iterator[str]:
    properties = {**base_properties, "ai.enable.summarization": True}
    path = write_properties(tmp_path / "fuzz.properties", properties)
    with serve_in_thread(create_app(path), health_path="/health/live") as base:
        yield base


def test_no_5xx_and_no_schema_violation(service_url: str, tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{service_url}/openapi.json",
            "--checks",
            CHECKS,
            "--max-examples",
            "50",
            "--seed",
            "1",
            "--generation-deterministic",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
