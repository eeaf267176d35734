"""Issue 66: a service reachable beyond its host without api.keys says so at start, in one
WARNING line (docker compose publishes it on 127.0.0.1 unless BIND opens it; inside the
container it listens on every interface, so compose tells it where it is published)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.cli.serve import PUBLISHED_VARIABLE, open_to_the_network
from service.config import Settings, settings_from_mapping
from testing.servers import free_port
from testing.service import ROOT, write_properties


def settings(**values: str) -> Settings:
    return settings_from_mapping(values, source="t", env={})


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]"])
def test_on_this_host_only_nothing_is_said(address: str) -> None:
    assert open_to_the_network(address, 8000, settings()) is None


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.0.2.10", "rag.example.org"])
def test_open_without_api_keys_is_one_line_saying_so(address: str) -> None:
    said = open_to_the_network(address, 8000, settings())
    assert said is not None and "\n" not in said
    assert f"open to the network on {address}:8000 without api.keys" in said
    assert "every document" in said  # security.enabled=false
    assert open_to_the_network(address, 8000, settings(**{"api.keys": "k1,k2"})) is None
    assert open_to_the_network(address, 8000, settings(**{"api.keys": " , "})) is not None


def test_serve_published_on_every_interface_warns_at_start(tmp_path: Path) -> None:
    """`solr-rag serve` as the compose stack runs it with BIND=0.0.0.0 (here on loopback, told
    it is published on every interface): the start's log has the WARNING; published on
    127.0.0.1, it has none."""
    config = write_properties(
        tmp_path / "rag.properties",
        {"solr.startup.check": False, "prompt.templates.dir": ROOT / "prompts"},
    )
    for published, warned in (("0.0.0.0", True), ("127.0.0.1", False)):
        log = tmp_path / f"serve-{published}.log"
        port = free_port()
        command = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1"]
        env = {**os.environ, PUBLISHED_VARIABLE: published, "LOG_FORMAT": "text"}
        with open(log, "wb") as out:
            server = subprocess.Popen(
                [*command, "--port", str(port), "--config", str(config)],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 60
                while "Uvicorn running" not in log.read_text() and time.monotonic() < deadline:
                    assert server.poll() is None, log.read_text()
                    time.sleep(0.2)
            finally:
                server.terminate()
                server.wait(timeout=30)
        text = log.read_text()
        assert "Uvicorn running" in text, text
        lines = [line for line in text.splitlines() if "open to the network" in line]
        assert len(lines) == (1 if warned else 0), text
        if warned:
            assert " WARNING " in lines[0] and f"{published}:{port} without api.keys" in lines[0]
