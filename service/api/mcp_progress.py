"""MCP progress notifications: a long tool call (ask, summarize) tells a host that asked for
progress (its request's `_meta.progressToken`) that it is still working, so a host that resets
its request timeout on progress (the TypeScript SDK's `resetTimeoutOnProgress`, the Python
SDK's `progress_callback`) waits for the answer instead of giving up at its 60 s.

One notification as the work begins, one as each stage of the answer begins (retrieve, chain:
the stage's name is the message), and one every PROGRESS_EVERY seconds between them (the LLM
writing a long answer). Sent with the official SDK's `Context.report_progress`; a request
without a token gets none. Over streamable HTTP, a request with a token is answered as an SSE
stream (`wants_stream`: the notifications, then the result), every other one as JSON.

    >>> async with reporting(ctx) as progress:
    ...     reply = await assemble.ask(snapshot, query, progress)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

from mcp.server.fastmcp import Context

log = logging.getLogger(__name__)

PROGRESS_EVERY = 10.0  # seconds between two notifications while nothing begins


def _token(ctx: Context) -> str | int | None:  # type: ignore[type-arg]
    meta = ctx.request_context.meta
    return None if meta is None else meta.progressToken


@asynccontextmanager
async def reporting(
    ctx: Context,  # type: ignore[type-arg]
    every: float = PROGRESS_EVERY,
) -> AsyncIterator[Callable[[str], None]]:
    """A `progress` callback for the pipeline (told each stage's name): the host is sent a
    progress notification for each, and one every `every` seconds, while the block runs;
    nothing when the request carries no progress token."""
    if _token(ctx) is None:
        yield lambda _: None
        return
    stages: asyncio.Queue[str] = asyncio.Queue()
    stages.put_nowait("started")
    done = asyncio.Event()
    told = [0]  # the notifications sent: numbered 1, 2, 3... whoever sends them

    async def tell(said: str) -> bool:
        told[0] += 1
        try:
            await ctx.report_progress(told[0], None, said)
        except Exception:  # the host left, or its stream closed: the answer goes on
            log.debug("MCP progress notification not sent", exc_info=True)
            return False
        return True

    async def send() -> bool:
        said = "working"
        while not done.is_set():
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation that
            # comes as the stage it waits for arrives, and this loop then outlived the answer,
            # keeping the host's stream open with a notification every `every` seconds
            with suppress(TimeoutError):  # nothing began: still working on the last
                async with asyncio.timeout(every):
                    said = await stages.get()
            if done.is_set():
                break
            if not await tell(said):
                return False
        return True

    sender = asyncio.create_task(send())
    try:
        yield stages.put_nowait
    finally:
        done.set()
        sender.cancel()
        host_listens = True
        with suppress(asyncio.CancelledError):
            host_listens = await sender
        # the stages that began while the sender waited its turn (a quick answer on a busy
        # machine) are told before the result, which follows this block: one for each
        while host_listens and not stages.empty():
            host_listens = await tell(stages.get_nowait())


def wants_stream(value: object, accept: str) -> bool:
    """Whether a JSON-RPC request asks for progress (a tools/call with a progress token) from
    a client that reads an SSE stream: answered as one, its notifications before its result."""
    if not isinstance(value, dict) or value.get("method") != "tools/call":
        return False
    params: Any = value.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token is not None and "text/event-stream" in accept
