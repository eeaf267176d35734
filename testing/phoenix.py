"""Arize Phoenix, a real OpenTelemetry collector with its own API and UI, for the tracing tests
and the screenshot in docs/operations.md.

Installed once from PyPI (a pinned version) into a virtualenv of its own, under
~/.cache/solr-rag/phoenix (or $SOLR_RAG_CACHE/phoenix): its few hundred dependencies never meet
the project's. Each start runs `phoenix serve` on free ports, in a folder of the caller's
(its SQLite database), and waits until it answers.

    >>> with running_phoenix(tmp_path) as phoenix:
    ...     # OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.otlp_http (or phoenix.otlp_grpc)
    ...     spans = phoenix.trace(trace_id, count=6)

Jaeger was tried first: its Go module cannot be `go install`ed (its go.mod has a replace
directive) and it ships no UI that way; Phoenix installs with pip alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from service.processes import start_group, stop_group
from testing.servers import free_port

VERSION = "20.26.1"
CACHE = Path(os.environ.get("SOLR_RAG_CACHE") or Path.home() / ".cache" / "solr-rag")
VENV = CACHE / "phoenix"
INSTALL_SECONDS = 1200  # pip on a slow box: a few hundred MB of wheels
START_SECONDS = 120  # its first start migrates its database (18 s on 2 busy cores)


class PhoenixUnavailable(RuntimeError):
    """Phoenix could not be installed or started here; the message says why and what to do."""


def installed(venv: Path = VENV) -> Path:
    """The `phoenix` command of the pinned version, installed into `venv` first if missing."""
    command = venv / "bin" / "phoenix"
    marker = venv / f".arize-phoenix-{VERSION}"
    if marker.exists() and command.exists():
        return command
    try:
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                           capture_output=True, timeout=300)  # fmt: skip
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", f"arize-phoenix=={VERSION}"],
            check=True,
            capture_output=True,
            timeout=INSTALL_SECONDS,
        )
    except subprocess.CalledProcessError as error:
        said = (error.stderr or b"").decode(errors="replace")[-600:]
        raise PhoenixUnavailable(
            f"pip could not install arize-phoenix=={VERSION} into {venv}: {said.strip()}; "
            f"remove {venv} and try again, or install it there by hand"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PhoenixUnavailable(f"arize-phoenix was not installed into {venv}: {error}") from None
    marker.touch()
    return command


@dataclass(frozen=True)
class Phoenix:
    """A running Phoenix: where to send spans, and its REST API to read them back."""

    url: str  # the UI and the REST API (/v1); OTLP over HTTP at /v1/traces
    grpc_port: int
    project: str = "default"

    @property
    def otlp_http(self) -> str:
        """OTEL_EXPORTER_OTLP_ENDPOINT for http/protobuf (the exporter adds /v1/traces)."""
        return self.url

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans Phoenix holds of one trace (its REST API: name, context, parent_id,
        span_kind, status_code, attributes)."""
        response = httpx.get(
            f"{self.url}/v1/projects/{self.project}/spans",
            params={"trace_id": trace_id, "limit": 1000},
            timeout=10,
        )
        if response.status_code == 404:  # no span of the project yet
            return []
        response.raise_for_status()
        return list(response.json()["data"])

    def trace(self, trace_id: str, *, at_least: int = 1, seconds: float = 30) -> list[dict]:
        """The trace's spans once Phoenix holds `at_least` of them (spans leave the service
        in batches, a few seconds apart), or as many as it holds after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            found = self.spans(trace_id)
            if len(found) >= at_least or time.monotonic() > deadline:
                return found
            time.sleep(0.5)

    def screenshot(self, trace_id: str, span_id: str, path: Path) -> None:
        """A PNG of the trace in Phoenix's UI, the span `span_id` (OpenTelemetry's) open,
        taken by headless Chromium (Debian's /usr/bin/chromium, driven by Playwright)."""
        from playwright.sync_api import sync_playwright

        projects = httpx.get(f"{self.url}/v1/projects", timeout=10).json()["data"]
        project = next(p["id"] for p in projects if p["name"] == self.project)
        node = next(s["id"] for s in self.spans(trace_id) if s["context"]["span_id"] == span_id)
        page_url = f"{self.url}/projects/{project}/traces/{trace_id}?selectedSpanNodeId={node}"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
            )
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                # its page asks GitHub, PyPI and Google's fonts, out of reach here: answered
                # in place (an unanswered fetch leaves the page blank)
                page.route(re.compile(r"^https?://(?!127\.0\.0\.1)"), _outside)
                page.goto(page_url, wait_until="networkidle")
                path.parent.mkdir(parents=True, exist_ok=True)
                try:  # the span's panel draws after its data comes: its attributes shown
                    page.get_by_role("tab", name="Attributes").first.click(timeout=30_000)
                    page.get_by_text("gen_ai.operation.name").first.wait_for(timeout=30_000)
                except Exception as error:
                    page.screenshot(path=str(path))
                    raise RuntimeError(f"Phoenix's page {page.url} errors: {errors}") from error
                page.wait_for_timeout(1000)
                page.screenshot(path=str(path))
            finally:
                browser.close()


def _outside(route: Any) -> None:
    """What Phoenix's page asks beyond this machine, answered as if nothing were new."""
    url = route.request.url
    if "pypi.org" in url:
        route.fulfill(json={"info": {"version": VERSION}, "releases": {}})
    elif "api.github.com" in url:
        route.fulfill(json={"stargazers_count": 0})
    elif "fonts.googleapis.com" in url:
        route.fulfill(body="", content_type="text/css")
    else:
        route.abort()


@contextmanager
def running_phoenix(folder: Path, venv: Path = VENV) -> Iterator[Phoenix]:
    """Phoenix serving on free ports with its data in `folder`, stopped on leaving;
    PhoenixUnavailable when it cannot be installed or does not start."""
    command = installed(venv)
    port, grpc_port = free_port(), free_port()
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log_path = folder / "phoenix.log"
    with log_path.open("wb") as log:
        process = start_group(
            [str(command), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_ready(process, url, log_path)
        yield Phoenix(url, grpc_port)
    finally:
        stop_group(process)


def _wait_until_ready(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    tail = log_path.read_text(errors="replace")[-1500:]
    raise PhoenixUnavailable(
        f"Phoenix did not answer {url}/healthz within {START_SECONDS:g} s (its log, "
        f"{log_path}):\n{tail}"
    )
