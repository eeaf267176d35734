"""What the service starts ends with it (issue 22): `solr-rag serve --with-model-server`
stopped by Ctrl-C or SIGTERM (or killed) leaves no model server behind, and stop_group ends
a whole process group, grandchildren included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.processes import start_group, stop_group
from testing.processes import alive, wait_until
from testing.servers import free_port
from testing.service import ROOT, write_properties


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("ending", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_service_stops_the_model_server_it_started(
    tmp_path: Path, base_properties: dict[str, object], ending: signal.Signals
) -> None:
    port, model_port = free_port(), free_port()
    path = write_properties(tmp_path / "serve.properties", base_properties)
    service = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--config", str(path),
         "--port", str(port), "--with-model-server", "--model-port", str(model_port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )  # fmt: skip
    try:
        assert wait_until(lambda: answers(f"http://127.0.0.1:{port}/health/live"), 90)
        assert answers(f"http://127.0.0.1:{model_port}/health")
        service.send_signal(ending)
        service.wait(timeout=30)
        assert wait_until(lambda: not answers(f"http://127.0.0.1:{model_port}/health"))
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()


def test_stop_group_ends_grandchildren_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # a launcher that starts a long-lived child and waits, as llama.cpp's launcher does
    script = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(600)"
    )
    launcher = start_group([sys.executable, "-c", script])
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text() != "")
    grandchild = int(pid_file.read_text())
    stop_group(launcher, timeout=5)
    assert launcher.poll() is not None
    assert wait_until(lambda: not alive(grandchild), 10)


def test_the_ci_check_names_a_process_left_behind(tmp_path: Path) -> None:
    marker = tmp_path / "left-behind"
    straggler = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", str(marker)]
    )
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / ".ci" / "leftovers.py"), str(tmp_path), "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        assert f"pid {straggler.pid}" in done.stderr
    finally:
        straggler.kill()
        straggler.wait()
