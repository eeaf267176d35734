"""Running an ASGI app on a real 127.0.0.1 socket, in a thread, for the length of a test."""

from __future__ import annotations

import os
import random
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from service.api.connections import SERVER_OPTIONS

# ports handed out in this process: never handed out twice (a port a test was given may not
# be listening yet when the next one is chosen)
_HANDED: set[int] = set()
_HANDING = threading.Lock()
# a Solr node's embedded ZooKeeper listens 1000 above it by Solr's default (the compose stack's
# Solr does; the launcher of solr/local lets the kernel choose)
ZOOKEEPER_OFFSET = 1000
# the slice of the ports a process hands out, "K/N": set by testing.suite for its two runs and
# by `make test-solr-versions` (which CI runs beside them)
PORTS_ENV = "SOLR_RAG_TEST_PORTS"


def free_port() -> int:
    """A port free on 127.0.0.1 (see free_ports)."""
    return free_ports(1)


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1, chosen below the kernel's
    ephemeral range (so no outgoing connection takes one before its server listens), each
    with its ZooKeeper port free too (ZOOKEEPER_OFFSET above), never one handed out before in
    this process, and inside this process's slice of the range (port_slice)."""
    first_allowed, last = port_slice()
    last_allowed = last - ZOOKEEPER_OFFSET - count
    if last_allowed < first_allowed:
        raise RuntimeError(
            f"the ports {first_allowed}-{last} ({PORTS_ENV}, the xdist workers) are too few for "
            f"{count} with their ZooKeeper ports: use fewer slices or workers"
        )
    with _HANDING:
        for _ in range(500):
            first = random.randint(first_allowed, last_allowed)
            ports = [*range(first, first + count)]
            ports += [port + ZOOKEEPER_OFFSET for port in ports]
            if any(port in _HANDED for port in ports) or not all(map(_bindable, ports)):
                continue
            _HANDED.update(ports)
            return first
    raise RuntimeError(f"found no {count} consecutive free ports")


def port_slice() -> tuple[int, int]:
    """The ports this process hands out, first and last: the slice PORTS_ENV names ("K/N",
    the K-th of N, from 0), or all of them; a pytest-xdist worker's share of that. Processes
    side by side (testing.suite's runs, CI's Solr 9.10.1 run, xdist's workers) each keep a
    list of the ports they handed out, but not of the others'."""
    first, last = 12_000, _ephemeral_low() - 1
    for share in _shares():
        width = (last - first + 1) // share[1]
        first, last = first + share[0] * width, first + (share[0] + 1) * width - 1
    return first, last


def _shares() -> list[tuple[int, int]]:
    text = os.environ.get(PORTS_ENV, "0/1")
    try:
        index, count = (int(part) for part in text.split("/"))
        if not 0 <= index < count:
            raise ValueError
    except ValueError:
        message = f"{PORTS_ENV}={text!r}: write K/N, the K-th slice of N (0 <= K < N)"
        raise RuntimeError(message) from None
    shares = [(index, count)]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1...
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and workers.isdigit():
        shares.append((int(worker[2:]), int(workers)))
    return shares


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        low = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        low = 32_768
    return max(low, 20_000)


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


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
            # uvicorn's own logging setup would give its loggers handlers on the stderr of the
            # moment (a test's captured stream, closed after it): its records go to the
            # process's root logger instead
            log_config=None,
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
        if thread.is_alive():  # a connection still open: uvicorn waits for it, without end
            warnings.warn(
                f"test server on port {port} still had connections open 10 s after it was "
                "asked to stop: forced to exit (its app's shutdown does not run)",
                stacklevel=3,
            )
            server.force_exit = True
            thread.join(timeout=60)
        if thread.is_alive():
            # left running, it would serve (and poll Solr) under the later tests' patches
            raise RuntimeError(f"test server on port {port} did not stop in 70 s")
