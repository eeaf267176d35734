"""The unit suite runs without sockets (`make test-unit`): a test here that opens a network
connection fails, naming where it tried to go (a Unix socket made in a temporary folder is
not the network, and stays allowed)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

_NETWORK = (socket.AF_INET, socket.AF_INET6)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    connect = socket.socket.connect

    def refused(self: socket.socket, address: object) -> None:
        if self.family in _NETWORK:
            raise AssertionError(
                f"a unit test opened a network connection to {address!r}: unit tests run "
                "without sockets; answer in process (httpx.ASGITransport) or move the test "
                "to tests/service"
            )
        connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", refused)
    yield
