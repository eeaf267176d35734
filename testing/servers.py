"""Running an ASGI app on a real 127.0.0.1 socket, in a thread, for the length of a test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from service.api.connections import SERVER_OPTIONS


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def dead_address() -> Iterator[str]:
    """`127.0.0.1:PORT` where nothing answers, held for the block: the port is bound but never
    listens, so a connection is refused and no other program can take the port meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


@contextmanager
def serve_in_thread(
    app: object, *, health_path: str = "/health", port: int | None = None
) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT) once the app answers `health_path`."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,  # type: ignore[arg-type]
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            **SERVER_OPTIONS,  # type: ignore[arg-type]
        )
    )
    thread = threading.Thread(target=server.run, name=f"test-server-{port}", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60  # a loaded machine (CI, a build) may start slowly
    while True:
        try:
            httpx.get(base + health_path, timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"test server on port {port} did not start") from None
            time.sleep(0.05)
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
