"""What a route is handed besides its body: the request's snapshot (its settings and clients).

>>> async def rag(body: RagRequest, request: Request, snapshot: CurrentSnapshot): ...
"""

from __future__ import annotations

import contextlib
from typing import Annotated

from fastapi import Depends, Request

from service.runtime import Runtime
from service.snapshot import Snapshot
from service.text.tokens import TokenizerError, loaded_counter


def runtime_of(request: Request) -> Runtime:
    """The service's long-lived resources."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def request_snapshot(request: Request) -> Snapshot:
    """The settings in force when the request arrived, and clients bound to them."""
    return Snapshot(runtime_of(request))


async def _current_snapshot(request: Request) -> Snapshot:
    # async: FastAPI runs a plain function dependency in a worker thread, a hop per request
    return await counting_snapshot(request)


async def counting_snapshot(request: Request) -> Snapshot:
    """`request_snapshot`, for the event loop: its token counter loaded first, off it."""
    snapshot = request_snapshot(request)
    # what counts llm.model's tokens (an OpenAI encoding, a tokenizer.json read for the first
    # time, or changed since) loaded off the event loop, not by the first question to count
    llm = snapshot.settings.llm
    with contextlib.suppress(TokenizerError):  # said by the route that counts
        await loaded_counter(llm.tokenizer, llm.model)
    return snapshot


CurrentSnapshot = Annotated[Snapshot, Depends(_current_snapshot)]
