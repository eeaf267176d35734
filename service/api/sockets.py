"""The WebSockets a worker holds open, counted: per caller (`ws.max.per.caller`) and in all
(`ws.max.total`), so that one caller's idle sockets (each may wait IDLE_SECONDS for a
question) cannot take the process's file descriptors from everyone else. A socket over either
cap is closed at once with 1013 (Try Again Later) and the reason.

The caller here is the person (a verified JWT's `sub`, the proxy's user), else the API key
from one address (a widget's key is in its page: every visitor sends it), else the address.
The total is below the open-file limit (`ulimit -n`) whatever is set: by default half of it.

    >>> sockets = OpenSockets()
    >>> release = sockets.take(caller, settings)      # or SocketsFull
    >>> try: serve() finally: release()
"""

from __future__ import annotations

import resource
from collections import Counter
from collections.abc import Callable

from service.api.identity import Caller
from service.config.settings import Settings

TRY_AGAIN_LATER = 1013  # WebSocket close code: the server has no room for it now
FILES_RESERVED = 128  # descriptors kept for Solr, the LLM, logs and HTTP, whatever is set
NO_FILE_LIMIT = 1_000_000  # the total when the process has no open-file limit


class SocketsFull(Exception):
    """No room for one more socket of this caller, or of anyone."""

    close_code = TRY_AGAIN_LATER

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def total_cap(configured: int) -> int:
    """The sockets a worker may hold: ws.max.total (0: half the open-file limit), never more
    than the limit less FILES_RESERVED."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured or NO_FILE_LIMIT
    ceiling = max(1, soft - FILES_RESERVED)
    return min(configured or max(1, soft // 2), ceiling)


def socket_owner(caller: Caller) -> str:
    """Whose share of the sockets: the person, else the key from this address, else the
    address."""
    if caller.person:
        return caller.person
    if caller.key:
        return f"{caller.key}@{caller.address}"
    return "address:" + caller.address


class OpenSockets:
    """The sockets open in this worker, by owner (one event loop: no lock)."""

    def __init__(self) -> None:
        self.by_owner: Counter[str] = Counter()
        self.total = 0

    def take(self, caller: Caller, settings: Settings) -> Callable[[], None]:
        """One more socket for `caller`, and what gives its place back (once); SocketsFull
        when the caller or the worker has no room for it."""
        server = settings.server
        owner = socket_owner(caller)
        per_caller, total = server.ws_max_per_caller, total_cap(server.ws_max_total)
        if per_caller and self.by_owner[owner] >= per_caller:
            raise SocketsFull(
                f"this caller has {self.by_owner[owner]} sockets open, as many as "
                f"ws.max.per.caller allows; close one, or retry later"
            )
        if self.total >= total:
            raise SocketsFull(
                f"the service holds {self.total} sockets, as many as ws.max.total (or its "
                "open-file limit) allows; retry later"
            )
        self.by_owner[owner] += 1
        self.total += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.total -= 1
            self.by_owner[owner] -= 1
            if self.by_owner[owner] <= 0:
                del self.by_owner[owner]

        return release
