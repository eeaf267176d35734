"""What a route is handed besides its body: the request's snapshot (its settings and clients).

>>> async def rag(body: RagRequest, request: Request, snapshot: CurrentSnapshot): ...
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.runtime import Runtime
from service.snapshot import Snapshot


def runtime_of(request: Request) -> Runtime:
    """The service's long-lived resources."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def request_snapshot(request: Request) -> Snapshot:
    """The settings in force when the request arrived, and clients bound to them."""
    return Snapshot(runtime_of(request))


async def _current_snapshot(request: Request) -> Snapshot:
    # async: FastAPI runs a plain function dependency in a worker thread, a hop per request
    return request_snapshot(request)


CurrentSnapshot = Annotated[Snapshot, Depends(_current_snapshot)]
