"""`solr-rag serve --workers 2`: two processes on one port, one configuration, one set of
metrics: an admin edit made through either reaches both, and /metrics adds up both."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from service.processes import start_server, stop_group
from testing.llm_server import LLMScript
from testing.servers import free_port
from testing.service import ADMIN_TOKEN, write_properties

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ANSWERS = 24


def answered(metrics: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "solr_rag_requests_total"
        and sample.labels.get("endpoint") == "/ai/rag"
        and sample.labels.get("status") == "200"
    )


def one_process(values: Path, scratch: Path) -> str:
    """The metrics one process wrote (its file alone, read as the exposition reads all)."""
    alone = scratch / f"alone-{values.stem}"
    alone.mkdir()
    shutil.copy(values, alone)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(alone))
    return generate_latest(registry).decode()


@pytest.mark.usefixtures("corpus")
def test_two_workers_share_config_edits_and_metrics(
    tmp_path: Path, base_properties: dict[str, object], llm: LLMScript
) -> None:
    config = write_properties(tmp_path / "rag.properties", base_properties)
    metrics_folder = tmp_path / "metrics"
    metrics_folder.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config)]
    command += ["--port", str(port), "--workers", "2"]
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_folder)}
    server = start_server(command, f"{base}/health/live", what="service", env=environment)
    try:
        # a connection each: the kernel spreads them over the workers, once both listen (on a
        # loaded box the second may start seconds after the first answers): asked until both
        # have answered, ANSWERS at a time, up to 10 times that
        asked = 0
        while asked < 10 * ANSWERS:
            for _ in range(ANSWERS):
                response = httpx.post(f"{base}/ai/rag", json={"query": "lighthouse"}, timeout=60)
                assert response.status_code == 200, response.text
            asked += ANSWERS
            scratch = tmp_path / f"after-{asked}"
            scratch.mkdir()
            by_process = [answered(one_process(path, scratch)) for path in metrics_folder.iterdir()]
            if sorted(count > 0 for count in by_process).count(True) == 2:
                break
        assert sorted(count > 0 for count in by_process).count(True) == 2  # both answered
        for _ in range(6):  # whichever worker is scraped reports both
            assert answered(httpx.get(f"{base}/metrics", timeout=30).text) == asked

        edit = httpx.patch(
            f"{base}/admin/config", json={"llm.temperature": 0.42}, headers=ADMIN, timeout=60
        )
        assert edit.status_code == 200, edit.text
        for _ in range(12):  # every worker reloads the file it changed
            settings = httpx.get(f"{base}/admin/config", headers=ADMIN, timeout=30).json()
            values = {key["key"]: key["value"] for key in settings["settings"]}
            assert values["llm.temperature"] in (0.42, "0.42")
    finally:
        stop_group(server, timeout=30)


def test_the_worker_count_is_bounded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.cli import main

    for count in ("0", "65", "many"):
        with pytest.raises(SystemExit) as exit_:
            main(["serve", "--workers", count])
        assert exit_.value.code == 2
    monkeypatch.setenv("WORKERS", "many")  # the environment's value is checked the same way
    with pytest.raises(SystemExit) as exit_:
        main(["serve"])
    assert exit_.value.code == 2
    assert "'many' is not a number of workers" in capsys.readouterr().err


@pytest.mark.usefixtures("corpus")
def test_a_memory_is_read_by_the_other_worker(
    tmp_path: Path, base_properties: dict[str, object], llm: LLMScript
) -> None:
    """Issue 68: memoryId was kept in one process, so a follow-up that landed on the other
    worker read nothing. With conversations on, memories are kept where they are (Solr): every
    follow-up, on whichever worker, reads the first turn."""
    key = "workers-memory-key"
    values = {**base_properties, "conversations.enabled": True, "api.keys": key}
    config = write_properties(tmp_path / "rag.properties", values)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config)]
    command += ["--port", str(port), "--workers", "2"]
    server = start_server(command, f"{base}/health/live", what="service", env=dict(os.environ))
    headers = {"X-API-Key": key}
    try:
        first = httpx.post(f"{base}/ai", headers=headers, timeout=60,
                           json={"query": "When was the lighthouse lamp electrified?"})  # fmt: skip
        memory = first.json()["content"]["memoryId"]
        for _ in range(8):  # a connection each: the kernel spreads them over the workers
            llm.reset()
            follow = {"query": "Who kept the lighthouse?", "memoryId": memory}
            again = httpx.post(f"{base}/ai", headers=headers, json=follow, timeout=60)
            assert again.json()["content"]["memoryId"] == memory, again.text
            asked = "\n".join(str(request.messages) for request in llm.requests)
            assert "When was the lighthouse lamp electrified?" in asked
    finally:
        stop_group(server, timeout=30)
