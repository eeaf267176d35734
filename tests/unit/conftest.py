"""The unit suite runs without sockets (`make test-unit`): a test here that opens a network
connection fails, naming where it tried to go (a Unix socket made in a temporary folder is
not the network, and stays allowed).

The refusal is for the test's own threads: the one it runs on and those it starts. Threads
already running when it began (the servers of a whole run's service tests, which share this
process when `make test` reaches the unit tests) keep their sockets: a refusal there would
fail another test's server in the middle of its work, not this test."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

_NETWORK = (socket.AF_INET, socket.AF_INET6)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    connect = socket.socket.connect
    # the threads themselves, not their idents: an ended thread's ident is given again
    others = {thread.ident: thread for thread in threading.enumerate()}
    others.pop(threading.get_ident(), None)

    def refused(self: socket.socket, address: object) -> None:
        mine = others.get(threading.get_ident()) is not threading.current_thread()
        if self.family in _NETWORK and mine:
            raise AssertionError(
                f"a unit test opened a network connection to {address!r}: unit tests run "
                "without sockets; answer in process (httpx.ASGITransport) or move the test "
                "to tests/service"
            )
        connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", refused)
    yield
